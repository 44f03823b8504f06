// Adam / AdamW on the CPU (kernels/optimizers.h): one fused pass, SIMD + OpenMP.
#include "kernels/cpu/loops.h"
#include "kernels/cpu/param_copy.h"
#include "kernels/optimizers.h"

namespace dsx::kernels {

namespace {

template <AdamDecay kDecay>
void adam_loop(const AdamCoeffs& c, float* param, const float* grad, float* exp_avg,
               float* exp_avg_sq, size_t count, const ParamCopy& copy) {
  cpu::with_param_copy(copy, [&](auto store) {
    cpu::for_each_element(count, [=](size_t i) DSX_ALWAYS_INLINE {
      float p = param[i], m = exp_avg[i], v = exp_avg_sq[i];
      adam_element<kDecay>(c, p, grad[i], m, v);
      param[i] = p;
      exp_avg[i] = m;
      exp_avg_sq[i] = v;
      store(i, p);
    });
  });
}

}  // namespace

void adam_step(const AdamHyper& hyper, int64_t step, float grad_factor, float* param,
               const float* grad, float* exp_avg, float* exp_avg_sq, size_t count, ParamCopy copy) {
  cpu::check_step("adam_step", step);
  const AdamCoeffs c = adam_coeffs(hyper, step, grad_factor);
  switch (adam_decay(hyper)) {
    case AdamDecay::None:
      adam_loop<AdamDecay::None>(c, param, grad, exp_avg, exp_avg_sq, count, copy);
      break;
    case AdamDecay::L2:
      adam_loop<AdamDecay::L2>(c, param, grad, exp_avg, exp_avg_sq, count, copy);
      break;
    case AdamDecay::Decoupled:
      adam_loop<AdamDecay::Decoupled>(c, param, grad, exp_avg, exp_avg_sq, count, copy);
      break;
  }
}

}  // namespace dsx::kernels
