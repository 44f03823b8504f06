// Adagrad on the CPU (kernels/optimizers.h): one fused pass, SIMD + OpenMP.
#include "kernels/cpu/param_copy.h"
#include "kernels/optimizers.h"

namespace dsx::kernels {

void adagrad_step(const AdagradHyper& hyper, float grad_factor, float* param, const float* grad,
                  float* sum_sq, size_t count, ParamCopy copy) {
  cpu::step_with_one_state(copy, count, param, grad, sum_sq, [=](float& p, float g, float& s) DSX_ALWAYS_INLINE {
    adagrad_element(hyper, p, g, s, grad_factor);
  });
}

}  // namespace dsx::kernels
