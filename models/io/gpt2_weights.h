// GPT-2 weights on disk, in the two formats users bring:
//  - llm.c checkpoints (gpt2_124M.bin, model_%08d.bin): 256 int32 header (magic 20240326,
//    version 3 = fp32 or 5 = bf16, maxT, V, L, NH, C, Vp), then the 16 tensors in the flat
//    layout of models/gpt2/config.h;
//  - safetensors with Hugging Face's GPT-2 names ("h.0.attn.c_attn.weight", ...) and layouts
//    (Conv1D weights stored (in, out), i.e. transposed; wte without vocabulary padding), loadable
//    by transformers' GPT2LMHeadModel, plus a config.json for it.
// In memory the weights are always the fp32 flat buffer of GPT2Cpu / LocalParams.
#pragma once

#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "models/gpt2/config.h"

namespace dsx::models {

struct GPT2Weights {
  GPT2Config config;
  std::vector<float> params;  // the flat llm.c layout, padded vocabulary rows zero
};

// Reads version 3 (fp32) or 5 (bf16) checkpoints. Error(Format) for a wrong magic, an unknown
// version, a bad header or a file whose size does not match the header.
GPT2Weights read_llmc_checkpoint(const std::string& path);
// dtype F32 writes version 3, BF16 version 5 (rounded to nearest even).
void write_llmc_checkpoint(const std::string& path, const GPT2Config& config, const float* params,
                           kernels::DType dtype = kernels::DType::F32);

// Reads F32, BF16 or F16 tensors with or without the "transformer." prefix; lm_head.weight and
// the attention-mask buffers are ignored (the head is tied). The head count, which the weights
// do not show, comes from the file's metadata ("n_head", written by dsx), else from a
// config.json beside the file, else from `num_heads` (0: none given).
GPT2Weights read_gpt2_safetensors(const std::string& path, int num_heads = 0);
// dtype F32 or BF16. Metadata: format=pt (transformers requires it), n_head, n_positions.
void write_gpt2_safetensors(const std::string& path, const GPT2Config& config, const float* params,
                            kernels::DType dtype = kernels::DType::F32);
// Hugging Face config.json for GPT2LMHeadModel (model_type gpt2, n_embd, n_head, n_layer, ...).
std::string gpt2_hf_config_json(const GPT2Config& config);
void write_gpt2_hf_config(const std::string& path, const GPT2Config& config);

// Either format, told apart by the first bytes (llm.c magic or a safetensors header).
GPT2Weights load_gpt2_weights(const std::string& path, int num_heads = 0);

}  // namespace dsx::models
