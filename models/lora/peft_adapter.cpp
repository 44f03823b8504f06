// PEFT adapter folders in and out (see peft_adapter.h).
#include "models/lora/peft_adapter.h"

#include <sys/stat.h>

#include <cstring>

#include "dsx/error.h"
#include "kernels/dtype.h"
#include "models/io/files.h"
#include "models/io/safetensors.h"

namespace dsx::models {

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void copy_as_float(float* out, const TensorView& t, const std::string& where) {
  const size_t n = t.numel();
  if (t.dtype == "F32") {
    std::memcpy(out, t.data, n * sizeof(float));
    return;
  }
  if (t.dtype != "BF16" && t.dtype != "F16")
    throw Error(ErrorKind::Format, where + " is " + t.dtype + "; an adapter holds F32, BF16 or F16 tensors");
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, t.data + 2 * i, 2);
    out[i] = t.dtype == "BF16" ? kernels::bf16_to_float(h) : kernels::fp16_to_float(h);
  }
}

}  // namespace

std::string peft_tensor_name(const ParamSpec& spec) { return "base_model.model." + spec.name; }

void read_peft_adapter_weights(const std::string& folder, const std::vector<ParamSpec>& specs, float* flat) {
  const std::string path = folder + "/adapter_model.safetensors";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw Error(ErrorKind::Io, path + " does not exist; a PEFT adapter folder holds adapter_model.safetensors "
                                      "(an older adapter_model.bin must be converted first)");
  const SafetensorsReader file(path);
  size_t found = 0;
  for (const auto& spec : specs) {
    const std::string name = peft_tensor_name(spec);
    const TensorView* t = file.find(name);
    if (!t)
      throw Error(ErrorKind::Format, path + ": tensor '" + name +
                                         "' is missing; the adapter was made with other target_modules or r "
                                         "than the adapter_config.json beside it says");
    if (t->shape != spec.shape)
      throw Error(ErrorKind::Format, path + ": tensor '" + name + "' has shape " + shape_text(t->shape) +
                                         ", the model expects " + shape_text(spec.shape) +
                                         " (r and the base model's sizes must match)");
    copy_as_float(flat + spec.offset, *t, path + ": tensor '" + name + "'");
    ++found;
  }
  if (found != file.tensors().size()) {
    for (const auto& [name, view] : file.tensors()) {
      bool known = false;
      for (const auto& spec : specs) known = known || peft_tensor_name(spec) == name;
      if (!known)
        throw Error(ErrorKind::Format, path + ": tensor '" + name +
                                           "' is not a tensor this adapter config trains (check its bias and "
                                           "modules_to_save; embedding adapters are not supported)");
    }
  }
}

void write_peft_adapter(const std::string& folder, const LoraConfig& config, const std::string& base_model,
                        const std::vector<ParamSpec>& specs, const float* flat) {
  SafetensorsWriter weights;
  for (const auto& spec : specs)
    weights.add(peft_tensor_name(spec), "F32", spec.shape, flat + spec.offset, spec.numel * sizeof(float));
  weights.set_metadata("format", "pt");
  weights.write(folder + "/adapter_model.safetensors");
  const std::string json = peft_adapter_config_json(config, base_model);
  AtomicWriter out(folder + "/adapter_config.json");
  out.write(json.data(), json.size());
  out.commit();
}

}  // namespace dsx::models
