// Lion on the CPU (kernels/optimizers.h): one fused pass, SIMD + OpenMP.
#include "kernels/cpu/param_copy.h"
#include "kernels/optimizers.h"

namespace dsx::kernels {

void lion_step(const LionHyper& hyper, float grad_factor, float* param, const float* grad,
               float* exp_avg, size_t count, ParamCopy copy) {
  cpu::step_with_one_state(copy, count, param, grad, exp_avg, [=](float& p, float g, float& m) DSX_ALWAYS_INLINE {
    lion_element(hyper, p, g, m, grad_factor);
  });
}

}  // namespace dsx::kernels
