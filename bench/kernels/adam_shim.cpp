// A C entry point to dsx's CPU Adam/AdamW for the Python scripts of bench/kernels/ (ctypes):
// cpu_adam_peers.py times dsx beside its peers in one process; check_against_deepspeed.py
// compares its results with DeepSpeedCPUAdam's.
#include <cstddef>
#include <cstdint>

#include "kernels/optimizers.h"

extern "C" int dsx_bench_adamw_step(float* p, const float* g, float* m, float* v, size_t n,
                                    int64_t step, float lr, float beta1, float beta2, float eps,
                                    float weight_decay, int adam_w_mode, int bias_correction,
                                    uint16_t* bf16_copy) {
  dsx::kernels::AdamHyper h;
  h.lr = lr;
  h.beta1 = beta1;
  h.beta2 = beta2;
  h.eps = eps;
  h.weight_decay = weight_decay;
  h.adam_w_mode = adam_w_mode != 0;
  h.bias_correction = bias_correction != 0;
  dsx::kernels::ParamCopy copy;
  if (bf16_copy) copy = {dsx::kernels::DType::BF16, bf16_copy};
  try {
    dsx::kernels::adam_step(h, step, 1.0f, p, g, m, v, n, copy);
  } catch (...) {
    return 1;
  }
  return 0;
}
