// GPT-2 weights in llm.c and Hugging Face safetensors form (see gpt2_weights.h).
#include "models/io/gpt2_weights.h"

#include <rapidjson/document.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "dsx/error.h"
#include "dsx/json_input.h"
#include "models/io/files.h"
#include "models/io/safetensors.h"

namespace dsx::models {

namespace {

constexpr int32_t kLlmcModelMagic = 20240326;
constexpr int32_t kLlmcFp32Version = 3;
constexpr int32_t kLlmcBf16Version = 5;
constexpr size_t kLlmcHeaderBytes = 256 * sizeof(int32_t);

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw Error(ErrorKind::Format, "GPT-2 weights '" + path + "': " + what);
}

// Conv1D tensors (HF stores them (in, out); we keep (out, in)).
bool hf_transposed(GPT2Tensor k) { return k == kQkvw || k == kAttprojw || k == kFcw || k == kFcprojw; }

void transpose(float* out, const float* in, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = in[r * cols + c];
}

}  // namespace

GPT2Weights read_llmc_checkpoint(const std::string& path) {
  MappedFile file(path);
  if (file.size() < kLlmcHeaderBytes) bad(path, "shorter than the 1024-byte llm.c header");
  int32_t h[256];
  std::memcpy(h, file.data(), kLlmcHeaderBytes);
  if (h[0] != kLlmcModelMagic)
    bad(path, "magic " + std::to_string(h[0]) + " is not llm.c's model magic " + std::to_string(kLlmcModelMagic));
  if (h[1] != kLlmcFp32Version && h[1] != kLlmcBf16Version)
    bad(path, "version " + std::to_string(h[1]) + " is not 3 (fp32) or 5 (bf16)");
  GPT2Weights w;
  w.config = GPT2Config{h[2], h[3], h[7], h[4], h[5], h[6]};
  try {
    validate(w.config);
  } catch (const Error& e) {
    bad(path, std::string("header: ") + e.what());
  }
  size_t n = 0;
  for (int k = 0; k < kNumGPT2Tensors; ++k) n += gpt2_tensor_numel(w.config, static_cast<GPT2Tensor>(k));
  size_t esize = h[1] == kLlmcFp32Version ? 4 : 2;
  if (file.size() != kLlmcHeaderBytes + n * esize)
    bad(path, "size " + std::to_string(file.size()) + " bytes, the header promises " +
                  std::to_string(kLlmcHeaderBytes + n * esize) + " (truncated or not this model)");
  w.params.resize(n);
  const uint8_t* body = file.data() + kLlmcHeaderBytes;
  if (esize == 4) {
    std::memcpy(w.params.data(), body, n * 4);
  } else {
    for (size_t i = 0; i < n; ++i) {
      uint16_t b;
      std::memcpy(&b, body + 2 * i, 2);
      w.params[i] = kernels::bf16_to_float(b);
    }
  }
  return w;
}

void write_llmc_checkpoint(const std::string& path, const GPT2Config& c, const float* params,
                           kernels::DType dtype) {
  if (dtype == kernels::DType::F16)
    throw Error(ErrorKind::Unsupported, "llm.c checkpoints are fp32 (version 3) or bf16 (version 5), not fp16");
  validate(c);
  int32_t h[256] = {};
  h[0] = kLlmcModelMagic, h[1] = dtype == kernels::DType::F32 ? kLlmcFp32Version : kLlmcBf16Version;
  h[2] = c.max_seq_len, h[3] = c.vocab_size, h[4] = c.num_layers, h[5] = c.num_heads;
  h[6] = c.channels, h[7] = c.padded_vocab_size;
  size_t n = 0;
  for (int k = 0; k < kNumGPT2Tensors; ++k) n += gpt2_tensor_numel(c, static_cast<GPT2Tensor>(k));
  AtomicWriter out(path);
  out.write(h, sizeof(h));
  if (dtype == kernels::DType::F32) {
    out.write(params, n * 4);
  } else {
    std::vector<uint16_t> b(n);
    for (size_t i = 0; i < n; ++i) b[i] = kernels::float_to_bf16(params[i]);
    out.write(b.data(), n * 2);
  }
  out.commit();
}

namespace {

int heads_from_config_json(const std::string& weights_path) {
  auto slash = weights_path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : weights_path.substr(0, slash);
  const std::string path = dir + "/config.json";
  if (!std::filesystem::exists(path)) return 0;
  const rapidjson::Document doc = parse_json(read_bounded_file(path), path, ErrorKind::Config);
  if (!doc.IsObject()) return 0;
  for (const char* key : {"n_head", "num_attention_heads"})
    if (doc.HasMember(key) && doc[key].IsInt()) return doc[key].GetInt();
  return 0;
}

// Tensor `name` as fp32 values, whatever its stored dtype.
std::vector<float> tensor_as_float(const SafetensorsReader& st, const TensorView& t, const std::string& name) {
  std::vector<float> out(t.numel());
  if (t.dtype == "F32") {
    std::memcpy(out.data(), t.data, t.bytes);
  } else if (t.dtype == "BF16" || t.dtype == "F16") {
    for (size_t i = 0; i < out.size(); ++i) {
      uint16_t b;
      std::memcpy(&b, t.data + 2 * i, 2);
      out[i] = t.dtype == "BF16" ? kernels::bf16_to_float(b) : kernels::fp16_to_float(b);
    }
  } else {
    bad(st.path(), "tensor '" + name + "' has dtype " + t.dtype + "; expected F32, BF16 or F16");
  }
  return out;
}

std::string hf_name(GPT2Tensor k, int layer) {
  static const char* names[kNumGPT2Tensors] = {
      "wte.weight", "wpe.weight", "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
      "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight",
      "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias", "ln_f.weight", "ln_f.bias"};
  return gpt2_tensor_per_layer(k) ? "h." + std::to_string(layer) + "." + names[k] : names[k];
}

// "" or "transformer.": what the file's tensor names start with (transformers writes either).
std::string tensor_prefix(const SafetensorsReader& st) {
  std::string prefix = st.find("wte.weight") ? "" : st.find("transformer.wte.weight") ? "transformer." : "?";
  if (prefix == "?") bad(st.path(), "no wte.weight tensor; this is not a GPT-2 model");
  return prefix;
}

const TensorView& required_tensor(const SafetensorsReader& st, const std::string& prefix, const std::string& name) {
  const TensorView* t = st.find(prefix + name);
  if (!t) bad(st.path(), "tensor '" + prefix + name + "' is missing");
  return *t;
}

// The head count: the file's metadata, config.json beside it (they must agree), else `num_heads`.
int resolve_heads(const SafetensorsReader& st, int num_heads) {
  const std::string& path = st.path();
  auto meta = st.metadata().find("n_head");
  int heads = meta != st.metadata().end() ? std::atoi(meta->second.c_str()) : 0;
  const int config_heads = heads_from_config_json(path);
  if (heads > 0 && config_heads > 0 && heads != config_heads)
    bad(path, "its metadata says n_head " + std::to_string(heads) + " but config.json beside it says " +
                  std::to_string(config_heads) + "; correct the one that is wrong");
  if (heads <= 0) heads = config_heads;
  if (heads <= 0) heads = num_heads;
  if (heads <= 0)
    bad(path, "the number of attention heads is unknown: put a config.json (with n_head) beside the "
              "file or pass the head count (dsx sample --heads N)");
  return heads;
}

// The model's sizes, read from the embeddings' shapes and the layers present.
GPT2Config config_from_tensors(const SafetensorsReader& st, const std::string& prefix, int num_heads) {
  const std::string& path = st.path();
  const TensorView& wte = required_tensor(st, prefix, "wte.weight");
  const TensorView& wpe = required_tensor(st, prefix, "wpe.weight");
  if (wte.shape.size() != 2 || wpe.shape.size() != 2 || wte.shape[1] != wpe.shape[1])
    bad(path, "wte and wpe must be matrices with the same number of columns");
  int layers = 0;
  while (st.find(prefix + "h." + std::to_string(layers) + ".ln_1.weight")) ++layers;

  GPT2Config c;
  c.vocab_size = static_cast<int>(wte.shape[0]);
  c.padded_vocab_size = padded_vocab(c.vocab_size);
  c.channels = static_cast<int>(wte.shape[1]);
  c.max_seq_len = static_cast<int>(wpe.shape[0]);
  c.num_layers = layers;
  c.num_heads = resolve_heads(st, num_heads);
  try {
    validate(c);
  } catch (const Error& e) {
    bad(path, e.what());
  }
  return c;
}

// Every tensor must be one the model reads; only the causal-mask buffers that old transformers
// saved (h.N.attn.bias, h.N.attn.masked_bias) are skipped, as transformers skips them.
void refuse_unknown_tensors(const SafetensorsReader& st, const std::string& prefix, int layers) {
  const std::string& path = st.path();
  std::set<std::string> known;
  for (int k = 0; k < kNumGPT2Tensors; ++k) {
    auto tk = static_cast<GPT2Tensor>(k);
    for (int l = 0; l < (gpt2_tensor_per_layer(tk) ? layers : 1); ++l) known.insert(prefix + hf_name(tk, l));
  }
  for (int l = 0; l < layers; ++l) {
    known.insert(prefix + "h." + std::to_string(l) + ".attn.bias");
    known.insert(prefix + "h." + std::to_string(l) + ".attn.masked_bias");
  }
  if (const TensorView* head = st.find("lm_head.weight")) {  // transformers may write the tied head
    const TensorView& wte = required_tensor(st, prefix, "wte.weight");
    if (head->dtype != wte.dtype || head->shape != wte.shape || std::memcmp(head->data, wte.data, wte.bytes) != 0)
      bad(path, "lm_head.weight differs from " + prefix + "wte.weight; dsx's GPT-2 ties the head to the embedding");
    known.insert("lm_head.weight");
  }
  for (const auto& [name, t] : st.tensors())
    if (!known.count(name))
      bad(path, "tensor '" + name + "' is not part of a GPT-2 model of " + std::to_string(layers) +
                    " layers (extra tensors are refused); remove it from the file");
}

// Each tensor, checked for its shape, into its place in the flat fp32 parameters (llm.c's layout).
std::vector<float> flat_params(const SafetensorsReader& st, const std::string& prefix, const GPT2Config& c) {
  auto specs = gpt2_param_specs(c);
  std::vector<float> params(specs.back().offset + specs.back().numel, 0.0f);
  for (int k = 0; k < kNumGPT2Tensors; ++k) {
    auto tk = static_cast<GPT2Tensor>(k);
    auto shape = gpt2_tensor_shape(c, tk);
    for (int l = 0; l < (gpt2_tensor_per_layer(tk) ? c.num_layers : 1); ++l) {
      std::string name = hf_name(tk, l);
      const TensorView& t = required_tensor(st, prefix, name);
      std::vector<int64_t> want = shape;
      if (tk == kWte) want[0] = c.vocab_size;
      if (hf_transposed(tk)) std::swap(want[0], want[1]);
      if (t.shape != want) bad(st.path(), "tensor '" + prefix + name + "' has an unexpected shape");
      std::vector<float> v = tensor_as_float(st, t, name);
      float* dst = params.data() + specs[gpt2_param_index(c, tk, l)].offset;
      if (hf_transposed(tk))
        transpose(dst, v.data(), want[0], want[1]);
      else
        std::memcpy(dst, v.data(), v.size() * 4);
    }
  }
  return params;
}

}  // namespace

GPT2Weights read_gpt2_safetensors(const std::string& path, int num_heads) {
  SafetensorsReader st(path);
  const std::string prefix = tensor_prefix(st);
  const GPT2Config c = config_from_tensors(st, prefix, num_heads);
  refuse_unknown_tensors(st, prefix, c.num_layers);
  return GPT2Weights{c, flat_params(st, prefix, c)};
}

void write_gpt2_safetensors(const std::string& path, const GPT2Config& c, const float* params,
                            kernels::DType dtype) {
  if (dtype == kernels::DType::F16)
    throw Error(ErrorKind::Unsupported, "GPT-2 safetensors export writes F32 or BF16");
  auto specs = gpt2_param_specs(c);
  SafetensorsWriter out;
  std::vector<float> buf;
  std::vector<uint16_t> half;
  for (int k = 0; k < kNumGPT2Tensors; ++k) {
    auto tk = static_cast<GPT2Tensor>(k);
    for (int l = 0; l < (gpt2_tensor_per_layer(tk) ? c.num_layers : 1); ++l) {
      const ParamSpec& s = specs[gpt2_param_index(c, tk, l)];
      std::vector<int64_t> shape = s.shape;
      if (tk == kWte) shape[0] = c.vocab_size;  // HF keeps the real vocabulary only
      size_t n = static_cast<size_t>(shape[0]) * (shape.size() > 1 ? shape[1] : 1);
      buf.assign(params + s.offset, params + s.offset + n);
      if (hf_transposed(tk)) {
        transpose(buf.data(), params + s.offset, shape[0], shape[1]);
        std::swap(shape[0], shape[1]);
      }
      if (dtype == kernels::DType::F32) {
        out.add(hf_name(tk, l), "F32", shape, buf.data(), n * 4);
      } else {
        half.resize(n);
        for (size_t i = 0; i < n; ++i) half[i] = kernels::float_to_bf16(buf[i]);
        out.add(hf_name(tk, l), "BF16", shape, half.data(), n * 2);
      }
    }
  }
  out.set_metadata("format", "pt");
  out.set_metadata("n_head", std::to_string(c.num_heads));
  out.set_metadata("n_positions", std::to_string(c.max_seq_len));
  out.write(path);
}

std::string gpt2_hf_config_json(const GPT2Config& c) {
  std::ostringstream s;
  s << "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n"
    << "  \"vocab_size\": " << c.vocab_size << ",\n  \"n_positions\": " << c.max_seq_len << ",\n"
    << "  \"n_ctx\": " << c.max_seq_len << ",\n  \"n_embd\": " << c.channels << ",\n"
    << "  \"n_layer\": " << c.num_layers << ",\n  \"n_head\": " << c.num_heads << ",\n"
    << "  \"activation_function\": \"gelu_new\",\n  \"layer_norm_epsilon\": 1e-05,\n"
    << "  \"resid_pdrop\": 0.0,\n  \"embd_pdrop\": 0.0,\n  \"attn_pdrop\": 0.0,\n"
    << "  \"tie_word_embeddings\": true\n}\n";
  return s.str();
}

void write_gpt2_hf_config(const std::string& path, const GPT2Config& c) {
  const std::string text = gpt2_hf_config_json(c);
  AtomicWriter out(path);
  out.write(text.data(), text.size());
  out.commit();
}

GPT2Weights load_gpt2_weights(const std::string& path, int num_heads) {
  int32_t magic = 0;
  {
    MappedFile f(path);
    if (f.size() >= 4) std::memcpy(&magic, f.data(), 4);
  }
  if (magic == kLlmcModelMagic) return read_llmc_checkpoint(path);
  return read_gpt2_safetensors(path, num_heads);
}

}  // namespace dsx::models
