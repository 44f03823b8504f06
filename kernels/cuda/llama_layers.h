// Llama-family layers on the GPU: the CUDA twins of kernels/cpu/llama_layers.h (token
// embedding, RMSNorm, the rotary embedding with grouped-query packing, SwiGLU), same names,
// argument order (outputs, inputs, sizes) and element formulas (kernels/llama_math.h), plus a
// stream. Matmuls, attention, residual adds and cross-entropy are the shared decoder layers
// (kernels/cuda/decoder_layers.h). T is the storage type: float, __nv_bfloat16 or __half; all
// arithmetic is fp32. Pointers are device memory. Conventions as on the CPU: parameter gradients
// +=, activation gradients =, rmsnorm's dinp +=. No atomics: the sums over rows (the RMSNorm
// weight, the embedding) are added in a fixed order, so gradients are the same bits every run.
// C++17: included by .cu files.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace dsx::kernels::cuda {

// out[n,:] = table[tokens[n],:]
template <class T>
void llama_embedding_forward(T* out, const int32_t* tokens, const T* table, size_t N, int C,
                             cudaStream_t stream);
// Its backward sums rows grouped on the GPU: kernels/cuda/batch_tokens.h's
// embedding_backward_grouped.

// out = inp * rstd * weight per row; rstd is fp32 (N), kept for backward.
template <class T>
void llama_rmsnorm_forward(T* out, float* rstd, const T* inp, const T* weight, size_t N, int C,
                           float eps, cudaStream_t stream);
// dinp += ..., dweight += ... . scratch: kernels::column_sums_scratch_floats(N, C) floats (the
// fp32 chunk sums of dweight, kernels/column_sums.h). A null dweight (a frozen norm) is skipped.
template <class T>
void llama_rmsnorm_backward(T* dinp, T* dweight, float* scratch, const T* dout, const T* inp,
                            const T* weight, const float* rstd, size_t N, int C,
                            cudaStream_t stream);

// The shared attention kernel on grouped-query heads, as on the CPU: packs q (N, NH*D), k and v
// (N, KV*D) into qkv (N, 3*NH*D), q and k rotated at positions 0..Tn-1 of each row, every kv head
// repeated for its NH/KV query heads. cos and sin are fp32 (Tn or more, D/2) tables.
template <class T>
void llama_qkv_pack_forward(T* qkv, const T* q, const T* k, const T* v, const float* cos,
                            const float* sin, int B, int Tn, int NH, int KV, int D,
                            cudaStream_t stream);
// The adjoint: dq, dk, dv (overwritten) from dqkv; a kv head's repeats summed, then rotated back.
template <class T>
void llama_qkv_pack_backward(T* dq, T* dk, T* dv, const T* dqkv, const float* cos, const float* sin,
                             int B, int Tn, int NH, int KV, int D, cudaStream_t stream);

// The rotary embedding in place on x (B*Tn rows of H heads of D), for attention that takes q and
// k in the projections' layout (cuDNN's). Backward turns a gradient back, also in place.
template <class T>
void llama_rope_forward(T* x, const float* cos, const float* sin, int B, int Tn, int H, int D,
                        cudaStream_t stream);
template <class T>
void llama_rope_backward(T* dx, const float* cos, const float* sin, int B, int Tn, int H, int D,
                         cudaStream_t stream);

// h = silu(gate) * up
template <class T>
void llama_swiglu_forward(T* h, const T* gate, const T* up, size_t n, cudaStream_t stream);
// dgate, dup from dh; dgate may alias dh.
template <class T>
void llama_swiglu_backward(T* dgate, T* dup, const T* dh, const T* gate, const T* up, size_t n,
                           cudaStream_t stream);

}  // namespace dsx::kernels::cuda
