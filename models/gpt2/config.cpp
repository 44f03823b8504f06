// GPT-2 presets and the llm.c parameter layout.
#include "models/gpt2/config.h"

#include <map>

#include "dsx/error.h"
#include "models/presets.h"
#include "models/token_batch.h"

namespace dsx::models {

namespace {

const std::map<std::string, GPT2Config>& presets() {
  static const std::map<std::string, GPT2Config> table = {
      {"gpt2-124M", gpt2_config(1024, 50257, 12, 12, 768)},
      {"gpt2-350M", gpt2_config(1024, 50257, 24, 16, 1024)},
      {"gpt2-774M", gpt2_config(1024, 50257, 36, 20, 1280)},
      {"gpt2-1558M", gpt2_config(1024, 50257, 48, 25, 1600)},
      {"gpt2-bench", gpt2_config(256, 50257, 6, 6, 384)},
      {"byte-tiny", gpt2_config(64, 256, 2, 4, 64)},
      {"byte-small", gpt2_config(256, 256, 4, 4, 128)},
  };
  return table;
}

const char* kTensorNames[kNumGPT2Tensors] = {
    "wte.weight", "wpe.weight", "ln_1.weight", "ln_1.bias", "attn.c_attn.weight",
    "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
    "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias", "ln_f.weight",
    "ln_f.bias"};

}  // namespace

int padded_vocab(int vocab_size) { return (vocab_size + 127) / 128 * 128; }

GPT2Config gpt2_config(int max_seq_len, int vocab_size, int num_layers, int num_heads, int channels) {
  return GPT2Config{max_seq_len, vocab_size, padded_vocab(vocab_size), num_layers, num_heads, channels};
}

GPT2Config gpt2_preset(const std::string& name) { return find_preset(presets(), name, "GPT-2"); }

std::vector<std::string> gpt2_preset_names() { return preset_names(presets()); }

void validate(const GPT2Config& c) {
  auto fail = [](const std::string& what) {
    throw Error(ErrorKind::Config, "GPT-2 config: " + what);
  };
  if (c.max_seq_len < 1 || c.max_seq_len > (1 << 20)) fail("max_seq_len must be in [1, 2^20]");
  if (c.vocab_size < 1) fail("vocab_size must be positive");
  if (c.padded_vocab_size < c.vocab_size) fail("padded_vocab_size must be >= vocab_size");
  if (c.num_layers < 1) fail("num_layers must be positive");
  if (c.num_heads < 1 || c.channels < 1) fail("num_heads and channels must be positive");
  if (c.channels % c.num_heads != 0)
    fail("channels (" + std::to_string(c.channels) + ") must be a multiple of num_heads (" +
         std::to_string(c.num_heads) + ")");
}

bool gpt2_tensor_per_layer(GPT2Tensor k) { return k != kWte && k != kWpe && k != kLnfw && k != kLnfb; }

std::vector<int64_t> gpt2_tensor_shape(const GPT2Config& c, GPT2Tensor k) {
  const int64_t C = c.channels;
  switch (k) {
    case kWte: return {c.padded_vocab_size, C};
    case kWpe: return {c.max_seq_len, C};
    case kQkvw: return {3 * C, C};
    case kQkvb: return {3 * C};
    case kAttprojw: return {C, C};
    case kFcw: return {4 * C, C};
    case kFcb: return {4 * C};
    case kFcprojw: return {C, 4 * C};
    default: return {C};  // layer norms and the two C-sized biases
  }
}

size_t gpt2_tensor_numel(const GPT2Config& c, GPT2Tensor k) {
  size_t n = 1;
  for (int64_t d : gpt2_tensor_shape(c, k)) n *= static_cast<size_t>(d);
  return gpt2_tensor_per_layer(k) ? n * static_cast<size_t>(c.num_layers) : n;
}

const GPT2Config& checked_for_build(const GPT2Config& config, int max_batch, int max_seq) {
  validate(config);
  check_build_sizes("GPT-2", max_batch, max_seq, config.max_seq_len, "the model's context");
  return config;
}

std::vector<ParamSpec> gpt2_param_specs(const GPT2Config& c) {
  validate(c);
  std::vector<ParamSpec> specs;
  size_t offset = 0;
  for (int k = 0; k < kNumGPT2Tensors; ++k) {
    auto t = static_cast<GPT2Tensor>(k);
    auto shape = gpt2_tensor_shape(c, t);
    bool decay = shape.size() == 2;
    size_t numel = 1;
    for (int64_t d : shape) numel *= static_cast<size_t>(d);
    if (!gpt2_tensor_per_layer(t)) {
      int layer = t == kWte || t == kWpe ? 0 : c.num_layers + 1;
      specs.push_back({kTensorNames[k], shape, layer, decay, offset, numel});
      offset += numel;
      continue;
    }
    for (int l = 0; l < c.num_layers; ++l) {
      specs.push_back({"h." + std::to_string(l) + "." + kTensorNames[k], shape, l + 1, decay,
                       offset, numel});
      offset += numel;
    }
  }
  return specs;
}

size_t gpt2_param_index(const GPT2Config& c, GPT2Tensor k, int block) {
  if (k == kWte || k == kWpe) return static_cast<size_t>(k);
  if (k == kLnfw || k == kLnfb) return 2 + 12 * static_cast<size_t>(c.num_layers) + (k - kLnfw);
  return 2 + static_cast<size_t>(k - kLn1w) * c.num_layers + static_cast<size_t>(block);
}

}  // namespace dsx::models
