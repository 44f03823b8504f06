// A C entry point to dsx's CPU AdamW for cpu_adam_peers.py, which loads it with ctypes so that
// dsx and its peers are timed in one process, round-robin, under the same machine load.
#include <cstddef>
#include <cstdint>

#include "kernels/optimizers.h"

extern "C" int dsx_bench_adamw_step(float* p, const float* g, float* m, float* v, size_t n,
                                    int64_t step, float lr, float beta1, float beta2, float eps,
                                    float weight_decay, uint16_t* bf16_copy) {
  dsx::kernels::AdamHyper h;
  h.lr = lr;
  h.beta1 = beta1;
  h.beta2 = beta2;
  h.eps = eps;
  h.weight_decay = weight_decay;
  dsx::kernels::ParamCopy copy;
  if (bf16_copy) copy = {dsx::kernels::DType::BF16, bf16_copy};
  try {
    dsx::kernels::adam_step(h, step, 1.0f, p, g, m, v, n, copy);
  } catch (...) {
    return 1;
  }
  return 0;
}
