// The decoder layers on the CPU: GPT-2's, of which the Llama family (kernels/cpu/llama_layers.h)
// uses the matmuls, attention, residual adds, classifier and cross-entropy. Each a free function
// pair, forward beside backward, with llm.c's argument order (outputs, inputs, sizes). Matmuls go to the CPU BLAS, the rest are OpenMP loops.
// Templated on the scalar: float is the training path, double the reference for the gradient
// checks (same code, dgemm instead of sgemm). Instantiated for float and double only.
//
// Shapes: N = B*T rows of C channels; weights in PyTorch Linear layout (OC, C).
// Backward conventions: parameter gradients ACCUMULATE (+=) because micro-batches add up;
// activation gradients are OVERWRITTEN (=) unless the comment says "+=" (the residual stream).
#pragma once

#include <cstddef>
#include <cstdint>

namespace dsx::kernels::cpu {

// out[b,t,:] = wte[token[b,t],:] + wpe[t,:]
template <class T>
void decoder_positional_embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tn,
                          int C);
// dwte[token,:] += dout; dwpe[t,:] += dout
template <class T>
void decoder_positional_embedding_backward(T* dwte, T* dwpe, const T* dout, const int32_t* tokens, int B, int Tn,
                           int C);

// LayerNorm over C with biased variance; keeps mean and 1/std per row for backward.
template <class T>
void decoder_layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias,
                            size_t N, int C);
// dinp += ..., dweight += ..., dbias += ...
template <class T>
void decoder_layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                             const T* weight, const T* mean, const T* rstd, size_t N, int C);

// out (N, OC) = inp (N, C) @ weight^T + bias (bias may be null).
template <class T>
void decoder_matmul_forward(T* out, const T* inp, const T* weight, const T* bias, size_t N, int C,
                         int OC);
// dinp = dout @ weight; dweight += dout^T @ inp; dbias += column sums of dout (dbias may be null;
// dweight too, for a frozen weight).
template <class T>
void decoder_matmul_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                          const T* weight, size_t N, int C, int OC);

// dbias[o0, o1) += column sums of dout (N, OC) over its N rows: the bias gradient, in parts.
template <class T>
void add_column_sums(T* dbias, const T* dout, size_t N, int OC, int o0, int o1);

// The tied classifier: logits (N, Vp) = inp (N, C) @ wte^T over the first V rows of wte (V, C)
// only; the padded columns [V, Vp) of each logits row are left as they are.
template <class T>
void decoder_classifier_forward(T* logits, const T* inp, const T* wte, size_t N, int C, int V, int Vp);
// dinp = dlogits @ wte and dwte += dlogits^T @ inp, over the first V columns of dlogits (N, Vp)
// and rows of wte: the padded rows of dwte are not touched. dwte null: a frozen head.
template <class T>
void decoder_classifier_backward(T* dinp, T* dwte, const T* dlogits, const T* inp, const T* wte, size_t N,
                              int C, int V, int Vp);

// Causal multi-head self-attention on packed qkv (B, T, 3C) -> out (B, T, C). `att` (B, NH, T, T)
// keeps the softmax probabilities for backward (zero above the diagonal).
template <class T>
void decoder_attention_forward(T* out, T* att, const T* qkv, int B, int Tn, int C, int NH);
// dqkv = gradient w.r.t. qkv.
template <class T>
void decoder_attention_backward(T* dqkv, const T* dout, const T* qkv, const T* att, int B, int Tn,
                             int C, int NH);

template <class T>
void decoder_gelu_forward(T* out, const T* inp, size_t n);
// dinp = gelu'(inp) * dout
template <class T>
void decoder_gelu_backward(T* dinp, const T* inp, const T* dout, size_t n);

// out = a + b
template <class T>
void decoder_residual_forward(T* out, const T* a, const T* b, size_t n);

// Softmax cross-entropy over the first V of Vp logits per row. Rows whose target is < 0 are
// ignored (loss 0). Writes each row's loss and log-sum-exp (for backward). Returns the number of
// counted rows.
template <class T>
size_t decoder_crossentropy_forward(T* losses, T* lse, const T* logits, const int32_t* targets,
                                 size_t N, int V, int Vp);
// The mean of the N rows' losses over the `counted` ones (ignored rows hold 0): the loss.
template <class T>
T decoder_mean_loss(const T* losses, size_t N, size_t counted) {
  T sum = 0;
  for (size_t i = 0; i < N; ++i) sum += losses[i];
  return counted ? sum / static_cast<T>(counted) : T(0);
}
// Turns logits into their gradient IN PLACE: (softmax - onehot) * dloss for counted rows, 0 for
// ignored rows and padded columns. Fused so the probabilities are never stored.
template <class T>
void decoder_crossentropy_backward(T* logits_to_dlogits, const T* lse, const int32_t* targets, T dloss,
                                size_t N, int V, int Vp);

}  // namespace dsx::kernels::cpu
