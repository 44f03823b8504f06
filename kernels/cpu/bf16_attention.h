// The decoder's causal self-attention with bf16 operands on CPU ranks (ds_config `bf16.enabled`):
// the contracts of decoder_attention_forward/backward (decoder_layers.h), with q, k, v, the
// probabilities, the output gradient and the scores' gradient rounded to bf16 as each product
// reads them, and the products summed in fp32 (kernels/cpu/gemm_bf16.h). The softmax, its
// backward and everything stored (out, att, dqkv) stay fp32, as in torch's bf16 SDPA on CPU,
// which keeps its softmax in fp32 too.
#pragma once

#include <type_traits>

#include "kernels/cpu/decoder_layers.h"

namespace dsx::kernels::cpu {

void decoder_attention_forward_bf16(float* out, float* att, const float* qkv, int B, int Tn, int C,
                                    int NH);
void decoder_attention_backward_bf16(float* dqkv, const float* dout, const float* qkv,
                                     const float* att, int B, int Tn, int C, int NH);

// `bf16` picks the bf16 products for float; the double reference model always takes fp32.
template <class T>
void decoder_attention_forward_as(bool bf16, T* out, T* att, const T* qkv, int B, int Tn, int C,
                                  int NH) {
  if constexpr (std::is_same_v<T, float>)
    if (bf16) return decoder_attention_forward_bf16(out, att, qkv, B, Tn, C, NH);
  decoder_attention_forward(out, att, qkv, B, Tn, C, NH);
}

template <class T>
void decoder_attention_backward_as(bool bf16, T* dqkv, const T* dout, const T* qkv, const T* att,
                                   int B, int Tn, int C, int NH) {
  if constexpr (std::is_same_v<T, float>)
    if (bf16) return decoder_attention_backward_bf16(dqkv, dout, qkv, att, B, Tn, C, NH);
  decoder_attention_backward(dqkv, dout, qkv, att, B, Tn, C, NH);
}

}  // namespace dsx::kernels::cpu
