// The Llama family's floating-point work, counted from its shape, for the flops profiler,
// autotune's FLOPS_per_gpu and the MFU line (Model::forward_flops).
#pragma once

#include <cstdint>

#include "models/llama/config.h"

namespace dsx::models {

// FLOPs of one forward pass over B rows of T tokens: 2 per multiply-add of every matmul (q, k, v,
// o; gate, up, down; the head over the vocabulary, tied or not) and of causal attention (scores
// and the weighted sum of v over the t+1 positions each token sees, per query head). Norms, RoPE,
// SwiGLU and softmax are element-wise and not counted, as for GPT-2.
double llama_forward_flops(const LlamaConfig& config, int64_t B, int64_t T);

}  // namespace dsx::models
