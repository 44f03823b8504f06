// The batch-size triad exactly as DeepSpeed solves it: train_batch_size = micro batch per GPU x
// gradient accumulation steps x data-parallel world size, with the missing ones derived by
// floor division and the four checks in DeepSpeed's order and words.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dsx::config {

struct BatchTriad {
  int64_t train_batch_size = 0;
  int64_t train_micro_batch_size_per_gpu = 0;
  int64_t gradient_accumulation_steps = 0;
  std::string error;  // empty when the triad is consistent; else DeepSpeed's message
  bool ok() const { return error.empty(); }
};

// T, M, G as given (nullopt = absent), W = data-parallel world size (>= 1).
BatchTriad solve_batch_triad(std::optional<int64_t> T, std::optional<int64_t> M,
                             std::optional<int64_t> G, int64_t W);

}  // namespace dsx::config
