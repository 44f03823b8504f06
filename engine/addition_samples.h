// After a run on the built-in addition task: the trained model's greedy answers to sums it never
// trained on, computed on the host whatever device trained.
#pragma once

#include <cstdint>
#include <vector>

#include "models/data/addition.h"
#include "models/model_source.h"

namespace dsx::engine {

// Prints `count` prompts with the model's answers and whether each is right.
void print_samples(const models::ModelShape& shape, const std::vector<float>& weights, const models::AdditionTask& task,
                   int seq, uint64_t seed, int count);

}  // namespace dsx::engine
