// The decoder layers on the GPU (GPT-2's, shared with the Llama family as on the CPU): the CUDA
// twins of kernels/cpu/decoder_layers.h, same names, argument
// order (outputs, inputs, sizes) and element formulas (kernels/decoder_math.h), plus a stream.
// T is the storage type of parameters, activations and gradients: float, __nv_bfloat16 or __half; all
// arithmetic is fp32. Pointers are device memory. Same accumulate/overwrite conventions as the
// CPU layers: parameter gradients +=, activation gradients =, layernorm's dinp +=.
// Attention is dsx's own kernel (softmax probabilities kept, O(T^2) memory per layer). The
// backward kernels use no atomics: parameter gradients that sum over rows (bias, LayerNorm,
// embeddings) are added in a fixed order in fp32, so gradients are identical run to run.
// C++17: included by .cu files.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/cuda/workspace.h"

namespace dsx::kernels::cuda {

template <class T>
void decoder_positional_embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tn, int C,
                          cudaStream_t stream);
// The B*Tn rows grouped on the GPU (kernels/cuda/batch_tokens.h's group_rows_by_token), so the
// host never sees the tokens.
template <class T>
void decoder_positional_embedding_backward(T* dwte, T* dwpe, const T* dout, const int32_t* grouped, int B, int Tn, int C,
                                           cudaStream_t stream);

// mean and rstd are fp32 (N each).
template <class T>
void decoder_layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias,
                            size_t N, int C, cudaStream_t stream);
// scratch: kernels::column_sums_scratch_floats(N, C) floats of device memory (the fp32 chunk
// sums of dweight and dbias before they are added to T; kernels/column_sums.h).
template <class T>
void decoder_layernorm_backward(T* dinp, T* dweight, T* dbias, float* scratch, const T* dout, const T* inp,
                             const T* weight, const float* mean, const float* rstd, size_t N, int C,
                             cudaStream_t stream);

// cuBLASLt matmuls: out (N, OC) = inp (N, C) @ weight^T + bias, bias fused into the epilogue.
// DecoderBlas owns the cuBLASLt handle and one cached plan per matmul shape (built on first use:
// descriptors, layouts and the heuristic's algorithm). It works in a workspace its owner allocates
// and keeps while it lives (kernels/cuda/workspace.h): cuBLASLt's, then the fp32 scratch of the
// bias gradient. Build it with this rank's GPU current; use it from one thread at a time.
class DecoderBlas {
 public:
  // The workspace for bias gradients of at most `max_bias_columns` columns (any number of rows).
  static size_t workspace_bytes(size_t max_bias_columns);
  // Throws dsx::Error, having freed whatever it had made; Error(Internal) when `workspace` is
  // smaller than workspace_bytes(0) or not 256-byte aligned.
  explicit DecoderBlas(Workspace workspace);
  ~DecoderBlas();
  DecoderBlas(DecoderBlas&&) noexcept;
  DecoderBlas& operator=(DecoderBlas&&) noexcept;
  DecoderBlas(const DecoderBlas&) = delete;
  DecoderBlas& operator=(const DecoderBlas&) = delete;

  size_t plans_built() const;  // distinct matmul plans made so far
  struct State;                // decoder_matmul.cu
  State& state() { return *state_; }

 private:
  std::unique_ptr<State> state_;
};

template <class T>
void decoder_matmul_forward(DecoderBlas& blas, T* out, const T* inp, const T* weight, const T* bias, size_t N, int C,
                         int OC, cudaStream_t stream);
// dinp = dout @ weight; dweight += dout^T @ inp; dbias += column sums of dout (dbias may be null),
// summed deterministically in fp32 (kernels/column_sums.h). A null dweight (a frozen weight) skips
// its product.
template <class T>
void decoder_matmul_backward(DecoderBlas& blas, T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                          const T* weight, size_t N, int C, int OC, cudaStream_t stream);
// A general product on the same plans, in kernels/cpu/gemm.h's row-major terms: C (M, N) =
// alpha op(A) op(B) + beta C, op(X) = X^T where trans; for the thin matmuls of LoRA's branch.
template <class T>
void decoder_gemm(DecoderBlas& blas, bool trans_a, bool trans_b, size_t M, int N, int K, float alpha, const T* A,
                  int lda, const T* B, int ldb, float beta, T* C, int ldc, cudaStream_t stream);
// The bias part of decoder_matmul_backward alone: dbias (OC) += column sums of dout (N, OC).
template <class T>
void decoder_bias_backward(DecoderBlas& blas, T* dbias, const T* dout, size_t N, int OC, cudaStream_t stream);

// att: fp32 (B, NH, T, T) softmax probabilities. dpre: fp32 scratch of the same size.
template <class T>
void decoder_attention_forward(T* out, float* att, const T* qkv, int B, int Tn, int C, int NH, cudaStream_t stream);
template <class T>
void decoder_attention_backward(T* dqkv, float* dpre, const T* dout, const T* qkv, const float* att, int B, int Tn,
                             int C, int NH, cudaStream_t stream);

template <class T>
void decoder_gelu_forward(T* out, const T* inp, size_t n, cudaStream_t stream);
template <class T>
void decoder_gelu_backward(T* dinp, const T* inp, const T* dout, size_t n, cudaStream_t stream);
template <class T>
void decoder_residual_forward(T* out, const T* a, const T* b, size_t n, cudaStream_t stream);

// Fused classifier. Forward: per row fp32 loss and log-sum-exp over the first V of Vp logits
// (targets < 0 ignored, loss 0). Backward: logits become (softmax - onehot) * dloss in place.
template <class T>
void decoder_crossentropy_forward(float* losses, float* lse, const T* logits, const int32_t* targets, size_t N, int V,
                               int Vp, cudaStream_t stream);
template <class T>
void decoder_crossentropy_backward(T* logits_to_dlogits, const float* lse, const int32_t* targets, float dloss,
                                size_t N, int V, int Vp, cudaStream_t stream);
// The same with dloss = grad_scale / *counted (0 when none counts), the count on the device
// (kernels/cuda/batch_tokens.h's decoder_mean_loss): the mean loss's gradient times grad_scale.
template <class T>
void decoder_crossentropy_backward(T* logits_to_dlogits, const float* lse, const int32_t* targets, float grad_scale,
                                const int32_t* counted, size_t N, int V, int Vp, cudaStream_t stream);

}  // namespace dsx::kernels::cuda
