// Nf4FrozenWeights (see nf4_frozen_weights.h).
#include "models/lora/nf4_frozen_weights.h"

#include <algorithm>
#include <limits>

#include "dsx/error.h"
#include "kernels/nf4_tensor.h"

namespace dsx::models {

namespace {

constexpr size_t kQuantised = std::numeric_limits<size_t>::max();

[[noreturn]] void bad(const std::string& source, const std::string& what) {
  throw Error(ErrorKind::Format, "QLoRA base '" + source + "': " + what);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

Nf4FrozenWeights::Nf4FrozenWeights(const LlamaConfig& config, Nf4BaseWeights base,
                                   const std::string& source)
    : specs_(llama_param_specs(config)), base_(std::move(base)) {
  size_t dense_numel = 0;
  for (const auto& s : specs_)
    if (!base_.linears.count(s.name)) dense_numel += s.numel;
  dense_.reserve(dense_numel);
  for (const auto& s : specs_) {
    if (const auto it = base_.linears.find(s.name); it != base_.linears.end()) {
      if (s.shape.size() != 2 || it->second.rows != s.shape[0] || it->second.cols != s.shape[1])
        bad(source, "NF4 tensor '" + s.name + "' is [" + std::to_string(it->second.rows) + ", " +
                        std::to_string(it->second.cols) + "]; config.json says " +
                        shape_text(s.shape));
      dense_offset_.push_back(kQuantised);
      continue;
    }
    const auto it = base_.dense.find(s.name);
    if (it == base_.dense.end()) bad(source, "tensor '" + s.name + "' is missing");
    if (it->second.values.size() != s.numel)
      bad(source, "tensor '" + s.name + "' is " + shape_text(it->second.shape) +
                      "; config.json says " + shape_text(s.shape));
    dense_offset_.push_back(dense_.size());
    dense_.insert(dense_.end(), it->second.values.begin(), it->second.values.end());
  }
  base_.dense.clear();  // copied into dense_
  by_block_.resize(config.num_layers);
  for (int b = 0; b < config.num_layers; ++b)
    for (int p = 0; p < kNumProjections; ++p) {
      const std::string name = "model.layers." + std::to_string(b) + "." +
                               projection_module(static_cast<Projection>(p)) + ".weight";
      const auto it = base_.linears.find(name);
      by_block_[b][p] = it == base_.linears.end() ? nullptr : &it->second;
    }
}

const void* Nf4FrozenWeights::param(size_t index) {
  const size_t at = dense_offset_.at(index);
  return at == kQuantised ? nullptr : dense_.data() + at;  // the model never reads a quantised one
}

const kernels::Nf4Tensor* Nf4FrozenWeights::quantized_tensor(size_t index) const {
  const auto it = base_.linears.find(specs_.at(index).name);
  return it == base_.linears.end() ? nullptr : &it->second;
}

std::vector<float> Nf4FrozenWeights::dequantised() const {
  std::vector<float> flat(specs_.empty() ? 0 : specs_.back().offset + specs_.back().numel);
  for (size_t i = 0; i < specs_.size(); ++i) {
    float* to = flat.data() + specs_[i].offset;
    if (const kernels::Nf4Tensor* t = quantized_tensor(i))
      kernels::nf4_dequantize_rows(to, *t, 0, t->rows);
    else
      std::copy_n(dense_.data() + dense_offset_[i], specs_[i].numel, to);
  }
  return flat;
}

void Nf4FrozenWeights::forward(int block, Projection p, float* out, const float* inp, size_t N) {
  kernels::nf4_linear_forward(out, inp, *linear(block, p), static_cast<int64_t>(N));
}

void Nf4FrozenWeights::backward_input(int block, Projection p, float* dinp, const float* dout,
                                      size_t N) {
  kernels::nf4_linear_backward_input(dinp, dout, *linear(block, p), static_cast<int64_t>(N), false);
}

size_t Nf4FrozenWeights::nf4_bytes() const {
  size_t bytes = 0;
  for (const auto& [name, t] : base_.linears) bytes += t.storage_bytes();
  return bytes;
}

}  // namespace dsx::models
