// SGD with momentum / nesterov on the CPU (kernels/optimizers.h): one fused pass, SIMD + OpenMP.
#include <string>

#include "dsx/error.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/param_copy.h"
#include "kernels/optimizers.h"

namespace dsx::kernels {
namespace {

template <SgdKind kKind, bool kNesterov>
void sgd_loop(const SgdHyper& h, float grad_factor, float* param, const float* grad, float* buf,
              size_t count, const ParamCopy& copy) {
  cpu::with_param_copy(copy, [&](auto store) {
    cpu::for_each_element(count, [=](size_t i) DSX_ALWAYS_INLINE {
      float p = param[i];
      float b = 0.0f;
      if constexpr (kKind == SgdKind::Momentum) b = buf[i];
      sgd_element<kKind, kNesterov>(h, p, grad[i], b, grad_factor);
      param[i] = p;
      if constexpr (kKind != SgdKind::Plain) buf[i] = b;
      store(i, p);
    });
  });
}

}  // namespace

void sgd_step(const SgdHyper& hyper, int64_t step, float grad_factor, float* param,
              const float* grad, float* momentum_buffer, size_t count, ParamCopy copy) {
  cpu::check_step("sgd_step", step);
  if (hyper.momentum == 0.0f) {
    sgd_loop<SgdKind::Plain, false>(hyper, grad_factor, param, grad, momentum_buffer, count, copy);
    return;
  }
  if (!momentum_buffer && count)
    throw Error(ErrorKind::Internal, "sgd_step: momentum " + std::to_string(hyper.momentum) +
                                         " needs a momentum buffer, got none");
  bool first = step == 1;
  if (first && hyper.nesterov)
    sgd_loop<SgdKind::MomentumFirst, true>(hyper, grad_factor, param, grad, momentum_buffer, count,
                                           copy);
  else if (first)
    sgd_loop<SgdKind::MomentumFirst, false>(hyper, grad_factor, param, grad, momentum_buffer, count,
                                            copy);
  else if (hyper.nesterov)
    sgd_loop<SgdKind::Momentum, true>(hyper, grad_factor, param, grad, momentum_buffer, count,
                                      copy);
  else
    sgd_loop<SgdKind::Momentum, false>(hyper, grad_factor, param, grad, momentum_buffer, count,
                                       copy);
}

}  // namespace dsx::kernels
