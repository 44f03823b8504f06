// Fused optimizer steps on the CPU over one flat fp32 partition (what ZeRO hands them): one pass
// reads grad and state, writes param and state, and optionally a 16-bit copy of the updated
// param (round to nearest even) so the working copy costs no extra pass. Stateless: the caller
// passes the step count (1 for the first step; it sets the bias corrections) and keeps it.
// SIMD level: kernels/simd.h; threads: OpenMP (OMP_NUM_THREADS). Any length and alignment.
// The element formulas and NaN/Inf behaviour: kernels/optimizer_math.h. CUDA twins with the
// same names and formulas: kernels/cuda/optimizers.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/dtype.h"
#include "kernels/optimizer_math.h"

namespace dsx::kernels {

// Where the updated parameters are also written, converted to `dtype`; data == nullptr: nowhere.
struct ParamCopy {
  DType dtype = DType::BF16;
  void* data = nullptr;
};

// `grad_factor` multiplies each gradient before use (1 / (loss_scale * clip)); see
// optimizer_math.h.

void adam_step(const AdamHyper& hyper, int64_t step, float grad_factor, float* param,
               const float* grad, float* exp_avg, float* exp_avg_sq, size_t count,
               ParamCopy copy = {});

void lion_step(const LionHyper& hyper, float grad_factor, float* param, const float* grad,
               float* exp_avg, size_t count, ParamCopy copy = {});

// momentum_buffer may be null when hyper.momentum == 0. On step 1 it is initialised to the
// gradient, as torch does.
void sgd_step(const SgdHyper& hyper, int64_t step, float grad_factor, float* param,
              const float* grad, float* momentum_buffer, size_t count, ParamCopy copy = {});

void adagrad_step(const AdagradHyper& hyper, float grad_factor, float* param, const float* grad,
                  float* sum_sq, size_t count, ParamCopy copy = {});

// LAMB over a flat buffer holding several tensors: tensor t is [offsets[t], offsets[t+1]), with
// offsets[0] == 0 and offsets[num_tensors] == count; the trust ratio is per tensor.
//
// Two phases so that ZeRO can sum the per-tensor squares over ranks in between:
//   lamb_prepare updates m and v and writes, per tensor, sum(p^2) to norms_sq[2t] and sum(u^2)
//   to norms_sq[2t+1] (the rank's part of each tensor);
//   lamb_apply updates p with the (global) sums; trust_out (optional, num_tensors) receives the
//   clamped trust ratios for logging.
// lamb_step runs both on one rank.
void lamb_prepare(const LambHyper& hyper, int64_t step, float grad_factor, const float* param,
                  const float* grad, float* exp_avg, float* exp_avg_sq, const size_t* offsets,
                  size_t num_tensors, double* norms_sq);
void lamb_apply(const LambHyper& hyper, int64_t step, float* param, const float* exp_avg,
                const float* exp_avg_sq, const size_t* offsets, size_t num_tensors,
                const double* norms_sq, float* trust_out = nullptr, ParamCopy copy = {});
void lamb_step(const LambHyper& hyper, int64_t step, float grad_factor, float* param,
               const float* grad, float* exp_avg, float* exp_avg_sq, const size_t* offsets,
               size_t num_tensors, float* trust_out = nullptr, ParamCopy copy = {});

}  // namespace dsx::kernels
