// QLoRA's frozen base: the block projections held as NF4 tensors (kernels/nf4_tensor.h) and run
// through the NF4 linear layer, forward and input gradient, one tile of rows dequantised at a
// time, never a whole matrix; everything else (embeddings, norms, biases, lm_head) dense fp32.
// To the CPU Llama it is both the ParamAccess of the base (a quantised projection's weight
// pointer is null) and the QuantizedProjections that multiplies by those weights.
// Held whole on every rank; at ZeRO stage 3 the engine partitions it
// (engine/partitioned_nf4_frozen_weights.h) from this validated, whole form.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "models/io/nf4_base_weights.h"
#include "models/llama/config.h"
#include "models/model.h"
#include "models/projection_adapters.h"

namespace dsx::models {

class Nf4FrozenWeights final : public ParamAccess, public QuantizedProjections {
 public:
  // `base` as read_nf4_base_weights gives it; `source` names it in errors (the folder).
  // Error(Format) naming the tensor for one that is missing or has the wrong shape.
  Nf4FrozenWeights(const LlamaConfig& config, Nf4BaseWeights base, const std::string& source);

  void acquire(int) override {}
  void release(int) override {}
  const void* param(size_t index) override;

  bool quantized(int block, Projection p) const override { return linear(block, p) != nullptr; }
  void forward(int block, Projection p, float* out, const float* inp, size_t N) override;
  void backward_input(int block, Projection p, float* dinp, const float* dout, size_t N) override;

  // Bytes held: the NF4 tensors' storage (codes, absmax, nested state) plus the dense fp32 part.
  size_t nf4_bytes() const;
  size_t dense_bytes() const { return dense_.size() * sizeof(float); }
  size_t held_bytes() const override { return nf4_bytes() + dense_bytes(); }
  const kernels::Nf4Tensor* linear(int block, Projection p) const {
    return by_block_.at(block)[static_cast<int>(p)];
  }
  const std::vector<ParamSpec>& specs() const { return specs_; }
  // The whole base in specs()' flat layout as the model computes with it: each NF4 tensor
  // dequantised and rounded to its compute dtype, the rest as held (for a merged export).
  std::vector<float> dequantised() const;
  // The NF4 tensor of specs()[index], or null for a dense one (param(index) reads those).
  const kernels::Nf4Tensor* quantized_tensor(size_t index) const;

 private:
  std::vector<ParamSpec> specs_;
  std::vector<size_t> dense_offset_;  // per spec: offset into dense_, or kQuantised
  std::vector<float> dense_;
  Nf4BaseWeights base_;
  std::vector<std::array<const kernels::Nf4Tensor*, kNumProjections>> by_block_;
};

}  // namespace dsx::models
