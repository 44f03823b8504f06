// Hugging Face model folders of the Llama family (what save_pretrained writes and the Hub
// serves): config.json, the weights as one model.safetensors or as shards
// model-0000i-of-0000N.safetensors listed by model.safetensors.index.json, and the tokenizer's
// files. In memory the weights are the fp32 flat buffer of llama_param_specs
// (models/llama/config.h).
//
// Reading checks every parameter is there with its exact shape and nothing else is, except the
// buffers transformers never loads (rotary_emb.inv_freq) and, with tied embeddings, an
// lm_head.weight equal to the embedding. Errors name the folder and the file: Error(Io) for a
// missing config.json, weights file or shard; Error(Format) for a truncated or damaged file, a
// missing or unexpected tensor, a wrong shape or dtype; config.json's own errors as
// parse_llama_hf_config gives them.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "models/llama/config.h"

namespace dsx::models {

// What config.json says a folder holds: GPT-2 (GPT2LMHeadModel / gpt2) or the Llama family.
// Error(Io) without a readable config.json, Error(Unsupported) naming any other architecture.
enum class HfFolderKind { Gpt2, Llama };
HfFolderKind hf_folder_kind(const std::string& dir);
// True when `dir`/config.json names a Llama-family model; false for anything else or no file.
bool hf_folder_is_llama_family(const std::string& dir);

struct LlamaWeights {
  LlamaConfig config;
  std::string torch_dtype;    // config.json's, "" when absent
  std::vector<float> params;  // llama_param_specs order
};

LlamaWeights read_llama_hf_folder(const std::string& dir);

// transformers' default shard limit (save_pretrained's "5GB" is 5 * 10^9 bytes).
inline constexpr size_t kDefaultMaxShardBytes = 5'000'000'000;

// The tokenizer, chat template and generation files copied from a source folder when they are
// there.
const std::vector<std::string>& hf_tokenizer_files();
// Copies those of them `from` holds into `dir`, each atomically ("" or the same folder: nothing).
// Error(Io) when `from` is not a folder.
void copy_hf_tokenizer_files(const std::string& from, const std::string& dir);

struct HfWriteOptions {
  kernels::DType dtype = kernels::DType::F32;      // on-disk dtype: F32, BF16 or F16
  size_t max_shard_bytes = kDefaultMaxShardBytes;  // more than this in all: shards and an index
  std::string tokenizer_from;                      // a folder to copy hf_tokenizer_files() from
};

// Writes `dir` (created if missing) so transformers' from_pretrained loads it: the weights (with
// metadata format=pt), config.json, the tokenizer files. Every file is written atomically; the
// weights files of an earlier save that the new one does not use are removed afterwards.
void write_llama_hf_folder(const std::string& dir, const LlamaConfig& config, const float* params,
                           const HfWriteOptions& options = {});

}  // namespace dsx::models
