// LoRA's dropout mask, written once for the CPU adapters (models/lora/lora_adapters.cpp) and the
// CUDA kernels (kernels/cuda/lora_linear.cu), so both devices drop the same elements. Whether
// element i of a projection's input is kept is a hash of the forward's count, the projection and
// i: a recomputed forward (activation checkpointing) and the backward see the forward's mask.
// Inverted dropout as torch's: kept elements are scaled by 1 / (1 - p).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/dtype.h"

namespace dsx::kernels::lora {

DSX_HD uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

struct DropoutMask {
  uint64_t key = 0, threshold = 0;
  float inv_keep = 1;
  DSX_HD bool kept(size_t i) const { return mix(key ^ (i * 0xd6e8feb86659fd93ULL)) < threshold; }
};

// The mask of projection `projection` of block `block` in the `forward`-th forward, dropping
// each element with probability `p` (0 <= p < 1).
inline DropoutMask dropout_mask(uint64_t forward, int block, int projection, double p) {
  const double keep = 1.0 - p;
  DropoutMask m;
  m.key = mix(forward * 0x100000001b3ULL + static_cast<uint64_t>(block) * 8 +
              static_cast<uint64_t>(projection));
  m.threshold = static_cast<uint64_t>(keep * 18446744073709551615.0);
  m.inv_keep = static_cast<float>(1.0 / keep);
  return m;
}

}  // namespace dsx::kernels::lora
