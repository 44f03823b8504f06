// Adagrad on the CPU (kernels/optimizers.h): one fused pass, SIMD + OpenMP.
#include "kernels/cpu/loops.h"
#include "kernels/cpu/param_copy.h"
#include "kernels/optimizers.h"

namespace dsx::kernels {

void adagrad_step(const AdagradHyper& hyper, float grad_factor, float* param, const float* grad,
                  float* sum_sq, size_t count, ParamCopy copy) {
  const AdagradHyper h = hyper;
  cpu::with_param_copy(copy, [&](auto store) {
    cpu::for_each_element(count, [=](size_t i) DSX_ALWAYS_INLINE {
      float p = param[i], s = sum_sq[i];
      adagrad_element(h, p, grad[i], s, grad_factor);
      param[i] = p;
      sum_sq[i] = s;
      store(i, p);
    });
  });
}

}  // namespace dsx::kernels
