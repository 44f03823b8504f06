// The frozen base of a LoRA model, as its layers read it: a ParamAccess over the base model's
// flat parameter order. Dense fp32 here, held whole and never written; a quantised base (NF4,
// QLoRA) plugs in behind the same seam by dequantising a layer in acquire(layer) and freeing it
// in release(layer). The engine's ZeRO never sees these weights: no gradients, no optimizer
// state.
#pragma once

#include <vector>

#include "dsx/error.h"
#include "models/model.h"

namespace dsx::models {

class DenseFrozenWeights final : public ParamAccess {
 public:
  // `flat` holds the base model's num_params() elements in the order of `specs`.
  DenseFrozenWeights(std::vector<ParamSpec> specs, std::vector<float> flat)
      : specs_(std::move(specs)), flat_(std::move(flat)) {
    size_t need = 0;
    for (const auto& s : specs_) need = std::max(need, s.offset + s.numel);
    if (flat_.size() < need)
      throw Error(ErrorKind::Internal, "frozen base weights: " + std::to_string(flat_.size()) + " elements for a model of " +
                                           std::to_string(need));
  }
  void acquire(int) override {}
  void release(int) override {}
  const void* param(size_t index) override { return flat_.data() + specs_.at(index).offset; }
  const std::vector<float>& flat() const { return flat_; }
  size_t held_bytes() const override { return flat_.size() * sizeof(float); }

 private:
  std::vector<ParamSpec> specs_;
  std::vector<float> flat_;
};

}  // namespace dsx::models
