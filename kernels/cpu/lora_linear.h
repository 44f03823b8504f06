// The LoRA branch beside a frozen linear layer (Hu et al. 2021, PEFT's lora.Linear), forward and
// backward side by side, in llm.c's argument order (outputs, inputs, sizes):
//   out += scale * (x @ A^T) @ B^T        x (N, C), A (R, C), B (OC, R), out (N, OC)
// x is the branch's input after dropout; dropout itself (and its mask) is the caller's. The
// frozen base weight never appears here, so the same branch serves a dense or a quantised base.
#pragma once

#include <cstddef>

namespace dsx::kernels::cpu {

// u (N, R) = x @ A^T is kept for backward; out (N, OC) += scale * u @ B^T.
template <class T>
void lora_linear_forward(T* out, T* u, const T* x, const T* A, const T* B, size_t N, int C, int R,
                         int OC, T scale);

// du (N, R) = scale * dout @ B (scratch); dB += scale * dout^T @ u; dA += du^T @ x;
// dx += du @ A (accumulated: the base layer's input gradient is already there).
template <class T>
void lora_linear_backward(T* dx, T* dA, T* dB, T* du, const T* dout, const T* x, const T* u,
                          const T* A, const T* B, size_t N, int C, int R, int OC, T scale);

}  // namespace dsx::kernels::cpu
