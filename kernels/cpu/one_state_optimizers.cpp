// Lion and Adagrad on the CPU (kernels/optimizers.h): the optimizers with one state per element
// (Lion's momentum, Adagrad's sum of squares), each one fused pass, SIMD + OpenMP.
#include "kernels/cpu/param_copy.h"
#include "kernels/optimizers.h"

namespace dsx::kernels {

void lion_step(const LionHyper& hyper, float grad_factor, float* param, const float* grad,
               float* exp_avg, size_t count, ParamCopy copy) {
  auto element = [=](float& p, float g, float& m) DSX_ALWAYS_INLINE { lion_element(hyper, p, g, m, grad_factor); };
  cpu::step_with_one_state(copy, count, param, grad, exp_avg, element);
}

void adagrad_step(const AdagradHyper& hyper, float grad_factor, float* param, const float* grad,
                  float* sum_sq, size_t count, ParamCopy copy) {
  auto element = [=](float& p, float g, float& s) DSX_ALWAYS_INLINE { adagrad_element(hyper, p, g, s, grad_factor); };
  cpu::step_with_one_state(copy, count, param, grad, sum_sq, element);
}

}  // namespace dsx::kernels
