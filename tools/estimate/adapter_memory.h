// LoRA and QLoRA in a memory estimate: which linear modules of a block carry adapters (PEFT's
// module names), how many adapter parameters that makes, and what the frozen base weighs, in
// 16-bit (LoRA) or in bitsandbytes' NF4 (QLoRA, blocks of 64, optional double quantisation).
// The training-state terms for the adapters are DeepSpeed's per-parameter ones; the frozen base
// has no gradients and no optimizer state. docs/fit_your_model.md shows the formulas.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/estimate/model_shape.h"

namespace dsx::estimate {

enum class Method { Full, Lora, Qlora };

const char* to_string(Method method);

struct AdapterOptions {
  int64_t r = 8;                     // PEFT's default rank
  std::vector<std::string> targets;  // empty: PEFT's default (Llama q_proj, v_proj; GPT-2 c_attn)
  bool double_quant = true;          // bnb_4bit_use_double_quant (the QLoRA recipe)
};

// A linear module of one transformer block: PEFT's name and its weight's [out, in].
struct LinearModule {
  std::string name;
  int64_t out = 0, in = 0;
};

// Every linear of one block, in Hugging Face's names (Llama: q/k/v/o_proj, gate/up/down_proj;
// GPT-2: c_attn, attn.c_proj as "c_proj", c_fc, mlp.c_proj as "mlp.c_proj").
std::vector<LinearModule> block_linears(const ModelShape& shape);

// The block linears the targets select: a name or "all-linear". Throws dsx::Error(Usage) for a
// target that names no module, listing the names there are.
std::vector<LinearModule> lora_targets(const ModelShape& shape, const AdapterOptions& options);

// r * (in + out) for every targeted module of every block.
int64_t lora_params(const ModelShape& shape, const AdapterOptions& options);

// Bytes one [out, in] weight takes in NF4: packed nibbles, fp32 absmax per 64 (or, double
// quantised, one byte per 64 plus an fp32 per 256 blocks, the 256-entry code and the offset),
// and the 16-entry NF4 code.
int64_t nf4_weight_bytes(int64_t out, int64_t in, bool double_quant);

// The frozen base's bytes: QLoRA holds every block linear in NF4 and the rest (embeddings,
// lm_head, norms) in 16-bit, as transformers' bitsandbytes loader does; LoRA holds it all in
// `weight_bytes` per parameter.
int64_t frozen_base_bytes(const ModelShape& shape, Method method, bool double_quant,
                          int64_t weight_bytes);

}  // namespace dsx::estimate
