// QLoRA's frozen base from a Hugging Face folder: every linear of the transformer blocks as an
// NF4 tensor (kernels/nf4_tensor.h, for nf4_linear_forward / nf4_linear_backward_input), and the
// rest (embeddings, norms, lm_head) as fp32. Two sources, one result:
// - a folder transformers saved with bitsandbytes 4-bit quantisation (config.json's
//   quantization_config; per linear `weight` as packed bytes beside `weight.absmax`,
//   `weight.quant_map`, `weight.nested_absmax`, `weight.nested_quant_map` and the JSON of
//   `weight.quant_state.bitsandbytes__nf4`), taken as it is, bit for bit;
// - a bf16/fp16/fp32 Llama-family folder, whose block linears are quantised at load as
//   bitsandbytes would (NF4, blocks of 64, double quantisation as asked).
// Errors name the file and the tensor: Error(Format) for a damaged quant state, Error(Unsupported)
// for FP4 or 8-bit folders.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernels/nf4_tensor.h"
#include "models/io/folder_tensors.h"

namespace dsx::models {

struct DenseTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

struct Nf4BaseWeights {
  std::map<std::string, kernels::Nf4Tensor>
      linears;                               // by tensor name, "model.layers.0.mlp.up_proj.weight"
  std::map<std::string, DenseTensor> dense;  // everything else, as fp32
  bool prequantized = false;                 // read from bitsandbytes' tensors
};

struct Nf4LoadOptions {  // for quantising a 16/32-bit folder at load
  bool double_quant = true;
  kernels::DType compute = kernels::DType::BF16;
};

// True when dir/config.json has a quantization_config with quant_method "bitsandbytes" and
// load_in_4bit; false for any other folder (or none).
bool hf_folder_is_bnb_4bit(const std::string& dir);

Nf4BaseWeights read_nf4_base_weights(const std::string& dir, const Nf4LoadOptions& options = {});

// One bitsandbytes 4-bit linear; `weight` is its packed tensor's name.
kernels::Nf4Tensor read_bnb_4bit_linear(const FolderTensors& tensors, const std::string& weight);

}  // namespace dsx::models
