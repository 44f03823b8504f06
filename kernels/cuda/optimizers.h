// Fused optimizer steps on the GPU: the CUDA twins of kernels/optimizers.h, same names, same
// element formulas (kernels/optimizer_math.h), same arguments plus the stream they run on.
// All pointers are device memory. One launch per flat buffer (LAMB: one launch per phase over
// all tensors); vectorised 16-byte loads where every buffer is 16-byte aligned, scalar loads
// otherwise. Nothing synchronises: the work is ordered on `stream` only. `grad_factor` may point
// at a device value (kernels/optimizer_math.h's GradFactor), read by the kernel itself.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/optimizers.h"

namespace dsx::kernels::cuda {

void adam_step(const AdamHyper& hyper, int64_t step, GradFactor grad_factor, float* param,
               const float* grad, float* exp_avg, float* exp_avg_sq, size_t count, ParamCopy copy,
               cudaStream_t stream);

void lion_step(const LionHyper& hyper, GradFactor grad_factor, float* param, const float* grad,
               float* exp_avg, size_t count, ParamCopy copy, cudaStream_t stream);

void sgd_step(const SgdHyper& hyper, int64_t step, GradFactor grad_factor, float* param,
              const float* grad, float* momentum_buffer, size_t count, ParamCopy copy,
              cudaStream_t stream);

void adagrad_step(const AdagradHyper& hyper, GradFactor grad_factor, float* param,
                  const float* grad, float* sum_sq, size_t count, ParamCopy copy,
                  cudaStream_t stream);

// The tensor table of a flat LAMB buffer: offsets[t]..offsets[t+1] is tensor t, in device
// memory (read by the kernels) and in host memory (to size the launch), both num_tensors + 1.
struct LambLayout {
  const size_t* offsets_device = nullptr;
  const size_t* offsets_host = nullptr;
  size_t num_tensors = 0;
};

// Device scratch that lamb_prepare needs for its per-block partial sums.
size_t lamb_workspace_bytes(const LambLayout& layout);

// As kernels/optimizers.h: norms_sq (device, 2 * num_tensors doubles) receives sum(p^2) and
// sum(u^2) per tensor; lamb_apply reads it (after an allreduce, for ZeRO). trust_out (device,
// optional) receives the clamped trust ratios.
void lamb_prepare(const LambHyper& hyper, int64_t step, GradFactor grad_factor, const float* param,
                  const float* grad, float* exp_avg, float* exp_avg_sq, const LambLayout& layout,
                  double* norms_sq, void* workspace, cudaStream_t stream);
void lamb_apply(const LambHyper& hyper, int64_t step, float* param, const float* exp_avg,
                const float* exp_avg_sq, const LambLayout& layout, const double* norms_sq,
                float* trust_out, ParamCopy copy, cudaStream_t stream);

}  // namespace dsx::kernels::cuda
