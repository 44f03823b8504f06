// The global batch kept across a change of world size (issue 35, elastic membership): DeepSpeed
// removed its `elasticity` block, so dsx keeps train_batch_size as the config says and
// recomputes gradient_accumulation_steps for the new data-parallel world with the configured
// micro-batch, or with the largest smaller micro-batch that keeps the global batch exact.
// Pure arithmetic; it does not read configs or environments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dsx::config {

struct ElasticBatch {
  int64_t micro_batch = 0;   // per rank, <= the configured one
  int64_t accumulation = 0;  // gradient_accumulation_steps
  std::string change;        // one line: old and new world, micro-batch, accumulation
  std::string error;         // empty when the global batch can be kept
  bool ok() const { return error.empty(); }
};

// The world sizes in [1, up_to] that keep `train_batch_size` exactly (its divisors).
std::vector<int64_t> worlds_keeping_batch(int64_t train_batch_size, int64_t up_to);

// train_batch_size = micro x accumulation x new_world, with micro the largest value <=
// configured_micro that makes accumulation whole. `old_*` only feed the line that says the change.
ElasticBatch rebatch_for_world(int64_t train_batch_size, int64_t configured_micro,
                               int64_t old_accumulation, int64_t old_world, int64_t new_world);

}  // namespace dsx::config
