// The zero_optimization keys that ZeRO itself acts on - stage, buckets, overlap and stage 3's
// gathering limits - with DeepSpeed's defaults, written here once. The reader fills them from the
// file (config::ZeroConfig is one), zero::ZeroOptions is one too and takes them whole, and
// `dsx estimate` starts from the same values, so no other place restates a default.
#pragma once

#include <cstdint>
#include <limits>

namespace dsx::config {

struct ZeroPartitioning {
  int64_t stage = 0;
  bool contiguous_gradients = true;
  bool reduce_scatter = true;
  int64_t reduce_bucket_size = 500'000'000;     // elements
  int64_t allgather_bucket_size = 500'000'000;  // elements
  bool overlap_comm = false;  // effective: null in the file means default_overlap_comm(stage)
  // stage 3
  int64_t prefetch_bucket_size = 50'000'000;
  int64_t param_persistence_threshold = 100'000;
  int64_t model_persistence_threshold = std::numeric_limits<int64_t>::max();  // all persistent
  int64_t max_live_parameters = 1'000'000'000;
  int64_t max_reuse_distance = 1'000'000'000;
};

// overlap_comm where the file leaves it out or writes null: DeepSpeed turns it on for stage 3 only.
inline bool default_overlap_comm(int64_t stage) { return stage == 3; }

}  // namespace dsx::config
