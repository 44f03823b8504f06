// The decoder's matmul layers and tied classifier with bf16 operands on CPU ranks (ds_config
// `bf16.enabled`): the same contracts as decoder_layers.h's, with inputs, weights and output
// gradients rounded to bf16 at use and the products summed in fp32 (kernels/cpu/gemm_bf16.h).
// Outputs, gradients, master weights and everything outside the GEMMs stay fp32.
//
// The *_as dispatchers let one model source serve both modes: `bf16` picks these for float, and
// the double reference model always takes the fp32 layers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/decoder_layers.h"

namespace dsx::kernels::cpu {

void decoder_matmul_forward_bf16(float* out, const float* inp, const float* weight,
                                 const float* bias, size_t N, int C, int OC);
void decoder_matmul_backward_bf16(float* dinp, float* dweight, float* dbias, const float* dout,
                                  const float* inp, const float* weight, size_t N, int C, int OC);
void decoder_classifier_forward_bf16(float* logits, const float* inp, const float* wte, size_t N,
                                     int C, int V, int Vp);
void decoder_classifier_backward_bf16(float* dinp, float* dwte, const float* dlogits,
                                      const float* inp, const float* wte, size_t N, int C, int V,
                                      int Vp);
// The classifier's forward with the cross-entropy's forward fused in: each row's max and sum of
// exponentials are taken from each vocabulary slice of logits just written (an online softmax),
// not in two more passes over all (N, V) logits. Writes the logits, lse and losses of
// decoder_classifier_forward_bf16 + decoder_crossentropy_forward (lse to fp32 rounding, summed in
// another order); returns the number of counted targets.
size_t decoder_classifier_crossentropy_forward_bf16(float* logits, float* losses, float* lse,
                                                    const float* inp, const float* wte,
                                                    const int32_t* targets, size_t N, int C, int V,
                                                    int Vp);

// The cross-entropy's backward fused into the classifier's: d loss / d logits is made one
// vocabulary slice at a time from the logits and lse of decoder_crossentropy_forward, rounded to
// bf16 for the slice's products, and never stored; `logits` is left as it was. The same arithmetic
// as decoder_crossentropy_backward followed by decoder_classifier_backward_bf16.
void decoder_crossentropy_classifier_backward_bf16(float* dinp, float* dwte, const float* logits,
                                                   const float* lse, const int32_t* targets,
                                                   float dloss, const float* inp, const float* wte,
                                                   size_t N, int C, int V, int Vp);

template <class T>
void decoder_matmul_forward_as(bool bf16, T* out, const T* inp, const T* weight, const T* bias,
                               size_t N, int C, int OC) {
  if constexpr (std::is_same_v<T, float>)
    if (bf16) return decoder_matmul_forward_bf16(out, inp, weight, bias, N, C, OC);
  decoder_matmul_forward(out, inp, weight, bias, N, C, OC);
}

template <class T>
void decoder_matmul_backward_as(bool bf16, T* dinp, T* dweight, T* dbias, const T* dout,
                                const T* inp, const T* weight, size_t N, int C, int OC) {
  if constexpr (std::is_same_v<T, float>)
    if (bf16) return decoder_matmul_backward_bf16(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
  decoder_matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}

template <class T>
void decoder_classifier_forward_as(bool bf16, T* logits, const T* inp, const T* wte, size_t N,
                                   int C, int V, int Vp) {
  if constexpr (std::is_same_v<T, float>)
    if (bf16) return decoder_classifier_forward_bf16(logits, inp, wte, N, C, V, Vp);
  decoder_classifier_forward(logits, inp, wte, N, C, V, Vp);
}

template <class T>
void decoder_classifier_backward_as(bool bf16, T* dinp, T* dwte, const T* dlogits, const T* inp,
                                    const T* wte, size_t N, int C, int V, int Vp) {
  if constexpr (std::is_same_v<T, float>)
    if (bf16) return decoder_classifier_backward_bf16(dinp, dwte, dlogits, inp, wte, N, C, V, Vp);
  decoder_classifier_backward(dinp, dwte, dlogits, inp, wte, N, C, V, Vp);
}

// The head's backward from the logits: fused for bf16 (float); for fp32 and the double reference,
// the logits become their gradient in place, then the classifier's backward reads them.
template <class T>
void decoder_crossentropy_classifier_backward_as(bool bf16, T* dinp, T* dwte, T* logits,
                                                 const T* lse, const int32_t* targets, T dloss,
                                                 const T* inp, const T* wte, size_t N, int C, int V,
                                                 int Vp) {
  if constexpr (std::is_same_v<T, float>)
    if (bf16)
      return decoder_crossentropy_classifier_backward_bf16(dinp, dwte, logits, lse, targets, dloss,
                                                           inp, wte, N, C, V, Vp);
  decoder_crossentropy_backward(logits, lse, targets, dloss, N, V, Vp);
  decoder_classifier_backward(dinp, dwte, logits, inp, wte, N, C, V, Vp);
}

}  // namespace dsx::kernels::cpu
