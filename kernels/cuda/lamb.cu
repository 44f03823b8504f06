// LAMB on the GPU (kernels/cuda/optimizers.h) as multi-tensor launches over the flat buffer:
// grid.y walks the tensors of the table, grid.x the blocks within a tensor.
//   1. lamb_moments_kernel: update m, v; per-block float64 partial sums of p^2 and u^2;
//   2. lamb_norms_kernel: one block per tensor adds its partials in a fixed order;
//   3. lamb_apply_kernel: trust ratio per tensor (clamped as DeepSpeed), p -= step * trust * u.
// Every sum has a fixed order, so the trust ratios are the same bits on every run.
#include <algorithm>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/optimizers.h"

namespace dsx::kernels::cuda {
namespace {

constexpr size_t kMaxBlocksPerTensor = 256;
constexpr size_t kMaxGridY = 65535;

// Blocks per tensor: enough for the largest tensor, capped (the blocks stride over the rest).
size_t blocks_per_tensor(const LambLayout& layout) {
  size_t longest = 0;
  for (size_t t = 0; t < layout.num_tensors; ++t)
    longest = std::max(longest, layout.offsets_host[t + 1] - layout.offsets_host[t]);
  return std::clamp<size_t>((longest + kBlock - 1) / kBlock, 1, kMaxBlocksPerTensor);
}

void check_layout(const char* kernel, const LambLayout& layout) {
  if (layout.num_tensors && (!layout.offsets_device || !layout.offsets_host))
    throw Error(ErrorKind::Internal,
                std::string(kernel) + ": the tensor table needs both device and host offsets");
}

__global__ void lamb_moments_kernel(LambCoeffs c, const float* factor, const float* p,
                                    const float* g, float* m, float* v, const size_t* offsets,
                                    size_t first_tensor, double* partials) {
  c.grad_factor = GradFactor(c.grad_factor, factor).applied();
  size_t t = first_tensor + blockIdx.y;
  size_t begin = offsets[t], end = offsets[t + 1];
  double p_sq = 0.0, u_sq = 0.0;
  for (size_t i = begin + size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < end;
       i += size_t(gridDim.x) * blockDim.x) {
    float mi = m[i], vi = v[i], pi = p[i];
    float u = lamb_moments_element(c, pi, g[i], mi, vi);
    m[i] = mi;
    v[i] = vi;
    p_sq += double(pi) * double(pi);
    u_sq += double(u) * double(u);
  }
  block_sum2(p_sq, u_sq);
  if (threadIdx.x == 0) {
    size_t slot = (t * gridDim.x + blockIdx.x) * 2;
    partials[slot] = p_sq;
    partials[slot + 1] = u_sq;
  }
}

__global__ void lamb_norms_kernel(const double* partials, unsigned blocks, double* norms_sq) {
  size_t t = blockIdx.x;
  double p_sq = 0.0, u_sq = 0.0;
  for (unsigned b = threadIdx.x; b < blocks; b += blockDim.x) {
    p_sq += partials[(t * blocks + b) * 2];
    u_sq += partials[(t * blocks + b) * 2 + 1];
  }
  block_sum2(p_sq, u_sq);
  if (threadIdx.x == 0) {
    norms_sq[2 * t] = p_sq;
    norms_sq[2 * t + 1] = u_sq;
  }
}

template <int kCopy>
__global__ void lamb_apply_kernel(LambCoeffs c, float* p, const float* m, const float* v,
                                  const size_t* offsets, size_t first_tensor,
                                  const double* norms_sq, float* trust_out, void* copy) {
  size_t t = first_tensor + blockIdx.y;
  size_t begin = offsets[t], end = offsets[t + 1];
  float trust = lamb_trust_ratio(c, norms_sq[2 * t], norms_sq[2 * t + 1]);
  if (trust_out && blockIdx.x == 0 && threadIdx.x == 0) trust_out[t] = trust;
  for (size_t i = begin + size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < end;
       i += size_t(gridDim.x) * blockDim.x) {
    float pi = p[i];
    lamb_apply_element(c, trust, pi, m[i], v[i]);
    p[i] = pi;
    if constexpr (kCopy != kCopyNone) store_element<static_cast<DType>(kCopy)>(copy, i, pi);
  }
}

}  // namespace

size_t lamb_workspace_bytes(const LambLayout& layout) {
  return std::max<size_t>(1, layout.num_tensors * blocks_per_tensor(layout)) * 2 * sizeof(double);
}

void lamb_prepare(const LambHyper& hyper, int64_t step, GradFactor grad_factor, const float* param,
                  const float* grad, float* exp_avg, float* exp_avg_sq, const LambLayout& layout,
                  double* norms_sq, void* workspace, cudaStream_t stream) {
  if (step < 1)
    throw Error(ErrorKind::Internal,
                "cuda::lamb_prepare: step must be >= 1, got " + std::to_string(step));
  check_layout("cuda::lamb_prepare", layout);
  if (layout.num_tensors == 0) return;
  LambCoeffs c = lamb_coeffs(hyper, step, grad_factor.host);
  unsigned blocks = static_cast<unsigned>(blocks_per_tensor(layout));
  auto* partials = static_cast<double*>(workspace);
  const size_t n = layout.offsets_host[layout.num_tensors], partial_bytes = lamb_workspace_bytes(layout);
  for (size_t first = 0; first < layout.num_tensors; first += kMaxGridY) {
    unsigned tensors = static_cast<unsigned>(std::min(kMaxGridY, layout.num_tensors - first));
    DSX_TOUCHES(DSX_READS(param, n * 4), DSX_READS(grad, n * 4), DSX_WRITES(exp_avg, n * 4),
                DSX_WRITES(exp_avg_sq, n * 4), DSX_WRITES(partials, partial_bytes),
                DSX_READS(layout.offsets_device, (layout.num_tensors + 1) * sizeof(size_t)),
                DSX_READS(grad_factor.device, sizeof(float)));
    DSX_LAUNCH(dim3(blocks, tensors), kBlock, 0, stream, lamb_moments_kernel)
    (c, grad_factor.device, param, grad, exp_avg, exp_avg_sq, layout.offsets_device, first,
     partials);
    check_launch("lamb_moments_kernel");
  }
  DSX_TOUCHES(DSX_READS(partials, partial_bytes), DSX_WRITES(norms_sq, 2 * layout.num_tensors * sizeof(double)));
  DSX_LAUNCH(static_cast<unsigned>(layout.num_tensors), kBlock, 0, stream, lamb_norms_kernel)(
      partials, blocks, norms_sq);
  check_launch("lamb_norms_kernel");
}

void lamb_apply(const LambHyper& hyper, int64_t step, float* param, const float* exp_avg,
                const float* exp_avg_sq, const LambLayout& layout, const double* norms_sq,
                float* trust_out, ParamCopy copy, cudaStream_t stream) {
  if (step < 1)
    throw Error(ErrorKind::Internal,
                "cuda::lamb_apply: step must be >= 1, got " + std::to_string(step));
  check_layout("cuda::lamb_apply", layout);
  if (layout.num_tensors == 0) return;
  LambCoeffs c = lamb_coeffs(hyper, step, 1.0f);
  unsigned blocks = static_cast<unsigned>(blocks_per_tensor(layout));
  dispatch_copy(copy.data, copy.dtype, [&](auto kc) {
    for (size_t first = 0; first < layout.num_tensors; first += kMaxGridY) {
      unsigned tensors = static_cast<unsigned>(std::min(kMaxGridY, layout.num_tensors - first));
      const size_t n = layout.offsets_host[layout.num_tensors];
      DSX_TOUCHES(DSX_WRITES(param, n * 4), DSX_READS(exp_avg, n * 4), DSX_READS(exp_avg_sq, n * 4),
                  DSX_READS(layout.offsets_device, (layout.num_tensors + 1) * sizeof(size_t)),
                  DSX_READS(norms_sq, 2 * layout.num_tensors * sizeof(double)),
                  DSX_WRITES(trust_out, layout.num_tensors * sizeof(float)),
                  DSX_WRITES(copy.data, n * dtype_size(copy.dtype)));
      DSX_LAUNCH(dim3(blocks, tensors), kBlock, 0, stream, lamb_apply_kernel<decltype(kc)::value>)(
          c, param, exp_avg, exp_avg_sq, layout.offsets_device, first, norms_sq, trust_out,
          copy.data);
      check_launch("lamb_apply_kernel");
    }
  });
}

}  // namespace dsx::kernels::cuda
