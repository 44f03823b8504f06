// LAMB on the CPU (kernels/optimizers.h): per tensor of the flat buffer, one pass that updates
// the moments and sums p^2 and u^2, then one pass that applies the clamped trust ratio.
#include <string>

#include "dsx/error.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/param_copy.h"
#include "kernels/optimizers.h"

namespace dsx::kernels {
namespace {

void check_offsets(const size_t* offsets, size_t num_tensors) {
  if (num_tensors && !offsets)
    throw Error(ErrorKind::Internal,
                "lamb: no tensor offsets for " + std::to_string(num_tensors) + " tensors");
  for (size_t t = 0; t < num_tensors; ++t)
    if (offsets[t + 1] < offsets[t])
      throw Error(ErrorKind::Internal, "lamb: tensor offsets must not decrease; tensor " +
                                           std::to_string(t) + " ends at " +
                                           std::to_string(offsets[t + 1]) + " before its start " +
                                           std::to_string(offsets[t]));
}

}  // namespace

void lamb_prepare(const LambHyper& hyper, int64_t step, float grad_factor, const float* param,
                  const float* grad, float* exp_avg, float* exp_avg_sq, const size_t* offsets,
                  size_t num_tensors, double* norms_sq) {
  cpu::check_step("lamb_prepare", step);
  check_offsets(offsets, num_tensors);
  const LambCoeffs c = lamb_coeffs(hyper, step, grad_factor);
  for (size_t t = 0; t < num_tensors; ++t) {
    size_t base = offsets[t];
    const float* p = param + base;
    const float* g = grad + base;
    float* m = exp_avg + base;
    float* v = exp_avg_sq + base;
    cpu::SumPair sums = cpu::sum_pairs(offsets[t + 1] - base, [=](size_t i) DSX_ALWAYS_INLINE {
      float mi = m[i], vi = v[i];
      float u = lamb_moments_element(c, p[i], g[i], mi, vi);
      m[i] = mi;
      v[i] = vi;
      return cpu::SumPair{double(p[i]) * double(p[i]), double(u) * double(u)};
    });
    norms_sq[2 * t] = sums.first;
    norms_sq[2 * t + 1] = sums.second;
  }
}

void lamb_apply(const LambHyper& hyper, int64_t step, float* param, const float* exp_avg,
                const float* exp_avg_sq, const size_t* offsets, size_t num_tensors,
                const double* norms_sq, float* trust_out, ParamCopy copy) {
  cpu::check_step("lamb_apply", step);
  check_offsets(offsets, num_tensors);
  const LambCoeffs c = lamb_coeffs(hyper, step, 1.0f);
  for (size_t t = 0; t < num_tensors; ++t) {
    const float trust = lamb_trust_ratio(c, norms_sq[2 * t], norms_sq[2 * t + 1]);
    if (trust_out) trust_out[t] = trust;
    size_t base = offsets[t];
    float* p = param + base;
    const float* m = exp_avg + base;
    const float* v = exp_avg_sq + base;
    ParamCopy part = copy;
    if (part.data) part.data = static_cast<char*>(part.data) + base * dtype_size(part.dtype);
    cpu::with_param_copy(part, [&](auto store) {
      cpu::for_each_element(offsets[t + 1] - base, [=](size_t i) DSX_ALWAYS_INLINE {
        float pi = p[i];
        lamb_apply_element(c, trust, pi, m[i], v[i]);
        p[i] = pi;
        store(i, pi);
      });
    });
  }
}

void lamb_step(const LambHyper& hyper, int64_t step, float grad_factor, float* param,
               const float* grad, float* exp_avg, float* exp_avg_sq, const size_t* offsets,
               size_t num_tensors, float* trust_out, ParamCopy copy) {
  std::vector<double> norms_sq(2 * num_tensors);
  lamb_prepare(hyper, step, grad_factor, param, grad, exp_avg, exp_avg_sq, offsets, num_tensors,
               norms_sq.data());
  lamb_apply(hyper, step, param, exp_avg, exp_avg_sq, offsets, num_tensors, norms_sq.data(),
             trust_out, copy);
}

}  // namespace dsx::kernels
