// The Llama-family layers the shared decoder layers do not already provide, as free function pairs in
// llm.c's argument order (outputs, inputs, sizes): token embedding, RMSNorm, the rotary embedding
// with grouped-query packing, SwiGLU. Element math is kernels/llama_math.h; matmuls, attention and
// cross-entropy are the shared ones (kernels/cpu/decoder_layers.h). Instantiated for float and double.
//
// Shapes: N = B*T rows of C channels. Conventions as in decoder_layers.h: parameter gradients
// ACCUMULATE (+=); activation gradients are OVERWRITTEN (=) unless the comment says "+=".
#pragma once

#include <cstddef>
#include <cstdint>

namespace dsx::kernels::cpu {

// out[n,:] = table[token[n],:]
template <class T>
void llama_embedding_forward(T* out, const int32_t* tokens, const T* table, size_t N, int C);
// dtable[token[n],:] += dout[n,:]
template <class T>
void llama_embedding_backward(T* dtable, const T* dout, const int32_t* tokens, size_t N, int C);

// out = inp * rstd * weight per row; keeps rstd (N) for backward.
template <class T>
void llama_rmsnorm_forward(T* out, T* rstd, const T* inp, const T* weight, size_t N, int C, T eps);
// dinp += ..., dweight += ... (dweight null: a frozen norm)
template <class T>
void llama_rmsnorm_backward(T* dinp, T* dweight, const T* dout, const T* inp, const T* weight,
                            const T* rstd, size_t N, int C);

// Grouped-query attention fed to the shared multi-head kernel: packs q (N, NH*D), k and v (N, KV*D)
// into qkv (N, 3*NH*D) with q and k rotated at positions 0..Tn-1 of each row and every kv head
// repeated for its NH/KV query heads (query head h reads kv head h / (NH/KV)). cos and sin are
// (Tn or more, D/2) tables.
template <class T>
void llama_qkv_pack_forward(T* qkv, const T* q, const T* k, const T* v, const T* cos, const T* sin,
                            int B, int Tn, int NH, int KV, int D);
// The adjoint: dq, dk, dv from dqkv, the repeated heads' gradients summed and rotated back.
template <class T>
void llama_qkv_pack_backward(T* dq, T* dk, T* dv, const T* dqkv, const T* cos, const T* sin, int B,
                             int Tn, int NH, int KV, int D);

// h = silu(gate) * up
template <class T>
void llama_swiglu_forward(T* h, const T* gate, const T* up, size_t n);
// dgate, dup from dh; dgate may alias dh.
template <class T>
void llama_swiglu_backward(T* dgate, T* dup, const T* dh, const T* gate, const T* up, size_t n);

}  // namespace dsx::kernels::cpu
