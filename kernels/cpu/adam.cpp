// Adam / AdamW on the CPU (kernels/optimizers.h): one fused pass, SIMD + OpenMP.
#include "kernels/cpu/loops.h"
#include "kernels/cpu/param_copy.h"
#include "kernels/optimizers.h"

namespace dsx::kernels {

void adam_step(const AdamHyper& hyper, int64_t step, float grad_factor, float* param,
               const float* grad, float* exp_avg, float* exp_avg_sq, size_t count, ParamCopy copy) {
  cpu::check_step("adam_step", step);
  const AdamCoeffs c = adam_coeffs(hyper, step, grad_factor);
  cpu::with_param_copy(copy, [&](auto store) {
    cpu::for_each_element(count, [=](size_t i) DSX_ALWAYS_INLINE {
      float p = param[i], m = exp_avg[i], v = exp_avg_sq[i];
      adam_element(c, p, grad[i], m, v);
      param[i] = p;
      exp_avg[i] = m;
      exp_avg_sq[i] = v;
      store(i, p);
    });
  });
}

}  // namespace dsx::kernels
