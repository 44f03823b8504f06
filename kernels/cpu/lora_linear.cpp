// The LoRA branch as four small GEMMs each way (see lora_linear.h). R is small (4..64), so every
// product is thin; gemm() decides by size whether to split it across the OpenMP threads.
#include "kernels/cpu/lora_linear.h"

#include "kernels/cpu/gemm.h"

namespace dsx::kernels::cpu {

template <class T>
void lora_linear_forward(T* out, T* u, const T* x, const T* A, const T* B, size_t N, int C, int R,
                         int OC, T scale) {
  gemm(false, true, N, R, C, T(1), x, C, A, C, T(0), u, R);
  gemm(false, true, N, OC, R, scale, u, R, B, R, T(1), out, OC);
}

template <class T>
void lora_linear_backward(T* dx, T* dA, T* dB, T* du, const T* dout, const T* x, const T* u,
                          const T* A, const T* B, size_t N, int C, int R, int OC, T scale) {
  gemm(false, false, N, R, OC, scale, dout, OC, B, R, T(0), du, R);
  gemm(true, false, OC, R, N, scale, dout, OC, u, R, T(1), dB, R);
  gemm(true, false, R, C, N, T(1), du, R, x, C, T(1), dA, C);
  gemm(false, false, N, C, R, T(1), du, R, A, C, T(1), dx, C);
}

template void lora_linear_forward<float>(float*, float*, const float*, const float*, const float*,
                                         size_t, int, int, int, float);
template void lora_linear_forward<double>(double*, double*, const double*, const double*,
                                          const double*, size_t, int, int, int, double);
template void lora_linear_backward<float>(float*, float*, float*, float*, const float*,
                                          const float*, const float*, const float*, const float*,
                                          size_t, int, int, int, float);
template void lora_linear_backward<double>(double*, double*, double*, double*, const double*,
                                           const double*, const double*, const double*,
                                           const double*, size_t, int, int, int, double);

}  // namespace dsx::kernels::cpu
