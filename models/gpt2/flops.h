// GPT-2's floating-point work, counted exactly from its shape, for the flops profiler, autotune's
// FLOPS_per_gpu and the MFU line (Model::forward_flops).
#pragma once

#include <cstdint>

#include "models/gpt2/config.h"

namespace dsx::models {

// FLOPs of one forward pass over B rows of T tokens: 2 per multiply-add of every matmul (the
// four per block, the tied classifier over the padded vocabulary) and of causal attention
// (scores and weighted sum over the t+1 positions each token sees).
double gpt2_forward_flops(const GPT2Config& config, int64_t B, int64_t T);

}  // namespace dsx::models
