// Reading QLoRA's base (see nf4_base_weights.h). bitsandbytes' serialisation: Linear4bit's
// state dict writes the packed weight and QuantState.as_dict(packed=True) beside it.
#include "models/io/nf4_base_weights.h"

#include <rapidjson/document.h>

#include <cstring>
#include <filesystem>

#include "dsx/error.h"
#include "dsx/json_input.h"
#include "models/io/files.h"
#include "models/io/hf_folder.h"

namespace dsx::models {

namespace {

namespace k = dsx::kernels;

constexpr const char* kQuantStateSuffix = ".quant_state.bitsandbytes__nf4";

[[noreturn]] void bad(const std::string& file, const std::string& what) {
  throw Error(ErrorKind::Format, "'" + file + "': " + what);
}

const Located& require(const FolderTensors& t, const std::string& name, const std::string& weight) {
  const Located* found = t.find(name);
  if (!found) {
    const Located& w = *t.find(weight);
    bad(*w.file, "tensor '" + name + "' is missing; a bitsandbytes 4-bit weight '" + weight +
                     "' needs it (save the model again with transformers and bitsandbytes)");
  }
  return *found;
}

template <class T>
std::vector<T> values_of(const Located& t, const std::string& name, const char* dtype,
                         size_t count) {
  if (t.view->dtype != dtype || t.view->numel() != count)
    bad(*t.file, "tensor '" + name + "' should be " + dtype + " with " + std::to_string(count) +
                     " elements; it is " + t.view->dtype + " with " +
                     std::to_string(t.view->numel()));
  std::vector<T> v(count);
  std::memcpy(v.data(), t.view->data, count * sizeof(T));
  return v;
}

k::DType dtype_named(const std::string& name, const std::string& file, const std::string& tensor) {
  if (name == "bfloat16") return k::DType::BF16;
  if (name == "float16") return k::DType::F16;
  if (name == "float32") return k::DType::F32;
  bad(file, "tensor '" + tensor + "' names dtype '" + name +
                "'; bitsandbytes 4-bit weights "
                "dequantise to bfloat16, float16 or float32");
}

struct QuantState {
  int64_t rows = 0, cols = 0, blocksize = 0, nested_blocksize = 0;
  bool nested = false;
  float offset = 0.0f;
  k::DType dtype = k::DType::BF16;
};

QuantState parse_quant_state(const Located& t, const std::string& name) {
  const std::string text(reinterpret_cast<const char*>(t.view->data), t.view->bytes);
  rapidjson::Document doc;
  doc.Parse(text.c_str(), text.size());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("quant_type") ||
      !doc["quant_type"].IsString() || !doc.HasMember("blocksize") || !doc["blocksize"].IsInt() ||
      !doc.HasMember("shape") || !doc["shape"].IsArray() || doc["shape"].Size() != 2 ||
      !doc.HasMember("dtype") || !doc["dtype"].IsString())
    bad(*t.file, "tensor '" + name +
                     "' is not bitsandbytes' quant-state JSON (quant_type, "
                     "blocksize, dtype, shape [out, in])");
  QuantState s;
  if (std::string(doc["quant_type"].GetString()) != "nf4")
    throw Error(ErrorKind::Unsupported, "'" + *t.file + "': tensor '" + name + "' is " +
                                            doc["quant_type"].GetString() +
                                            "; dsx reads NF4 4-bit weights only");
  s.blocksize = doc["blocksize"].GetInt();
  if (s.blocksize < 32 || s.blocksize > 4096 || (s.blocksize & (s.blocksize - 1)))
    bad(*t.file, "tensor '" + name + "' has blocksize " + std::to_string(s.blocksize) +
                     "; bitsandbytes uses powers of two from 32 to 4096");
  for (int i = 0; i < 2; ++i) {
    if (!doc["shape"][i].IsInt64() || doc["shape"][i].GetInt64() < 1)
      bad(*t.file, "tensor '" + name + "' has a shape that is not two positive sizes");
  }
  s.rows = doc["shape"][0].GetInt64();
  s.cols = doc["shape"][1].GetInt64();
  s.dtype = dtype_named(doc["dtype"].GetString(), *t.file, name);
  s.nested = doc.HasMember("nested_offset");
  if (s.nested) {
    if (!doc["nested_offset"].IsNumber() || !doc.HasMember("nested_blocksize") ||
        !doc["nested_blocksize"].IsInt() || doc["nested_blocksize"].GetInt() < 1)
      bad(*t.file, "tensor '" + name + "' has nested_offset without a valid nested_blocksize");
    s.offset = static_cast<float>(doc["nested_offset"].GetDouble());
    s.nested_blocksize = doc["nested_blocksize"].GetInt();
  }
  return s;
}

}  // namespace

k::Nf4Tensor read_bnb_4bit_linear(const FolderTensors& t, const std::string& weight) {
  const std::string state_name = weight + kQuantStateSuffix;
  const QuantState s = parse_quant_state(require(t, state_name, weight), state_name);
  k::Nf4Tensor w;
  w.rows = s.rows;
  w.cols = s.cols;
  w.blocksize = static_cast<int>(s.blocksize);
  w.compute = s.dtype;
  // The packed bytes may be stored as another dtype (bnb_4bit_quant_storage): only bytes count.
  const Located& packed = require(t, weight, weight);
  if (packed.view->bytes != static_cast<size_t>(k::nf4_packed_bytes(w.numel())))
    bad(*packed.file, "tensor '" + weight + "' holds " + std::to_string(packed.view->bytes) +
                          " bytes; a 4-bit [" + std::to_string(s.rows) + ", " +
                          std::to_string(s.cols) + "] weight packs into " +
                          std::to_string(k::nf4_packed_bytes(w.numel())));
  w.packed.assign(packed.view->data, packed.view->data + packed.view->bytes);
  const auto code =
      values_of<float>(require(t, weight + ".quant_map", weight), weight + ".quant_map", "F32", 16);
  for (unsigned i = 0; i < 16; ++i) {
    if (code[i] != k::nf4_value(i))
      bad(*t.find(weight + ".quant_map")->file,
          "tensor '" + weight + ".quant_map' is not the NF4 code");
  }
  const size_t blocks = static_cast<size_t>(w.blocks());
  const std::string absmax = weight + ".absmax";
  if (!s.nested) {
    w.absmax = values_of<float>(require(t, absmax, weight), absmax, "F32", blocks);
    return w;
  }
  k::Nf4NestedAbsmax n;
  n.blocksize = static_cast<int>(s.nested_blocksize);
  n.offset = s.offset;
  n.codes = values_of<uint8_t>(require(t, absmax, weight), absmax, "U8", blocks);
  const size_t nested_blocks = static_cast<size_t>(k::nf4_blocks(w.blocks(), n.blocksize));
  n.absmax = values_of<float>(require(t, weight + ".nested_absmax", weight),
                              weight + ".nested_absmax", "F32", nested_blocks);
  n.code = values_of<float>(require(t, weight + ".nested_quant_map", weight),
                            weight + ".nested_quant_map", "F32", 256);
  w.nested = std::move(n);
  return w;
}

namespace {

// config.json's quantization_config: "" when there is none, else its quant_method, with
// "bitsandbytes-4bit" for the one dsx reads.
std::string quantization_of(const std::string& dir) {
  const std::string path = dir + "/config.json";
  if (!std::filesystem::exists(path)) return "";
  const rapidjson::Document doc =
      parse_json(read_text_file(path, "a Hugging Face model folder needs its config.json"), path,
                 ErrorKind::Config);
  if (!doc.IsObject() || !doc.HasMember("quantization_config")) return "";
  const auto& q = doc["quantization_config"];
  if (!q.IsObject()) return "unknown";
  std::string method = q.HasMember("quant_method") && q["quant_method"].IsString()
                           ? q["quant_method"].GetString()
                           : "unknown";
  const bool four_bit =
      q.HasMember("load_in_4bit") && q["load_in_4bit"].IsBool() && q["load_in_4bit"].GetBool();
  return method == "bitsandbytes" && four_bit ? "bitsandbytes-4bit" : method;
}

}  // namespace

bool hf_folder_is_bnb_4bit(const std::string& dir) {
  return quantization_of(dir) == "bitsandbytes-4bit";
}

namespace {

DenseTensor dense_of(const Located& t, const std::string& name) {
  const TensorView& v = *t.view;
  if (v.dtype != "F32" && v.dtype != "BF16" && v.dtype != "F16")
    bad(*t.file, "tensor '" + name + "' has dtype " + v.dtype + "; dsx reads F32, BF16 or F16");
  const k::DType type = v.dtype == "F32"    ? k::DType::F32
                        : v.dtype == "BF16" ? k::DType::BF16
                                            : k::DType::F16;
  DenseTensor d{v.shape, std::vector<float>(v.numel())};
  for (size_t i = 0; i < d.values.size(); ++i) d.values[i] = k::load_as_float(type, v.data, i);
  return d;
}

// A linear of a transformer block: a 2-D weight under model.layers (norms are 1-D).
bool is_block_linear(const std::string& name, const TensorView& v) {
  return name.rfind("model.layers.", 0) == 0 && v.shape.size() == 2 && name.size() > 7 &&
         name.compare(name.size() - 7, 7, ".weight") == 0;
}

bool is_quant_state_part(const std::string& name) {
  for (const char* part :
       {".absmax", ".quant_map", ".nested_absmax", ".nested_quant_map", kQuantStateSuffix}) {
    const size_t n = std::strlen(part);
    if (name.size() > n && name.compare(name.size() - n, n, part) == 0) return true;
  }
  return false;
}

}  // namespace

Nf4BaseWeights read_nf4_base_weights(const std::string& dir, const Nf4LoadOptions& options) {
  Nf4BaseWeights base;
  const std::string quantization = quantization_of(dir);
  if (!quantization.empty() && quantization != "bitsandbytes-4bit")
    throw Error(ErrorKind::Unsupported,
                "'" + dir + "/config.json': quantization_config is " + quantization +
                    "; dsx reads bitsandbytes 4-bit (NF4) folders or unquantised ones");
  base.prequantized = !quantization.empty();
  // Quantising at load knows Llama-family names; GPT-2's Conv1D weights are stored transposed.
  if (!base.prequantized && hf_folder_kind(dir) != HfFolderKind::Llama)
    throw Error(ErrorKind::Unsupported,
                "'" + dir +
                    "' is a GPT-2 folder; dsx quantises "
                    "Llama-family folders to NF4 at load (or reads a folder "
                    "saved with bitsandbytes 4-bit)");
  const FolderTensors tensors(dir);
  for (const auto& [name, t] : tensors.tensors()) {
    if (base.prequantized) {
      if (is_quant_state_part(name)) continue;
      if (tensors.find(name + kQuantStateSuffix)) {
        base.linears[name] = read_bnb_4bit_linear(tensors, name);
        continue;
      }
    } else if (is_block_linear(name, *t.view)) {
      const DenseTensor d = dense_of(t, name);
      base.linears[name] =
          k::nf4_quantize_matrix(d.values.data(), k::DType::F32, d.shape[0], d.shape[1],
                                 {.blocksize = k::kNf4Blocksize,
                                  .double_quant = options.double_quant,
                                  .compute = options.compute});
      continue;
    }
    base.dense[name] = dense_of(t, name);
  }
  return base;
}

}  // namespace dsx::models
