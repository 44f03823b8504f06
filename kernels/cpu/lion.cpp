// Lion on the CPU (kernels/optimizers.h): one fused pass, SIMD + OpenMP.
#include "kernels/cpu/loops.h"
#include "kernels/cpu/param_copy.h"
#include "kernels/optimizers.h"

namespace dsx::kernels {

void lion_step(const LionHyper& hyper, float grad_factor, float* param, const float* grad,
               float* exp_avg, size_t count, ParamCopy copy) {
  const LionHyper h = hyper;
  cpu::with_param_copy(copy, [&](auto store) {
    cpu::for_each_element(count, [=](size_t i) DSX_ALWAYS_INLINE {
      float p = param[i], m = exp_avg[i];
      lion_element(h, p, grad[i], m, grad_factor);
      param[i] = p;
      exp_avg[i] = m;
      store(i, p);
    });
  });
}

}  // namespace dsx::kernels
