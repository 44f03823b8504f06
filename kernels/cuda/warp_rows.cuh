// Row-per-warp plumbing of the layer kernels (internal, decoder_layers.cu and llama_layers.cu): a
// norm or softmax row is reduced by one warp of 32 lanes, kWarpsPerBlock rows to a block.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace dsx::kernels::cuda {

inline constexpr int kWarp = 32;
inline constexpr int kWarpsPerBlock = 8;

// The sum over the warp's lanes; every lane gets it.
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Blocks for one warp per row.
inline unsigned warp_blocks(size_t rows) {
  return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

}  // namespace dsx::kernels::cuda
