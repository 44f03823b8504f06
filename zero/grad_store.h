// Where the model writes its gradients (in the model's dtype), and where this rank's reduced
// gradients lie, one strategy chosen once from the stage:
//   Full (stages 0, 1)    one gradient buffer for the whole model, accumulated across
//                         micro-steps and reduced in place once, in the boundary micro-step;
//                         the partition is this rank's range of it.
//   Slots (stages 2, 3)   each layer's gradients live in a slot only until its bucket is packed
//                         (freed on the communication stream); the reductions of every
//                         micro-step add into the partition buffer.
#pragma once

#include <memory>
#include <vector>

#include "zero/grad_reducer.h"
#include "zero/layout.h"
#include "zero/partitioning.h"
#include "zero/zero_context.h"

namespace dsx::zero {

class GradStore {
 public:
  virtual ~GradStore() = default;
  // Where the model writes (accumulates) the gradient of the tensor at flat offset `offset` of
  // `layer`.
  virtual void* grad(int layer, size_t offset) = 0;
  // The layer's gradients, ZeRO order, to hand to the reducer.
  void* layer_grads(int layer) { return grad(layer, layout_.layer_range(layer).begin); }
  // Whether this micro-step reduces (the boundary one, or every one).
  virtual bool reduces(bool boundary) const = 0;
  virtual GradReducer::Mode mode() const = 0;
  // The layer's gradients were packed on the communication stream.
  virtual void packed(int layer) { (void)layer; }
  virtual void* partition() = 0;  // this rank's reduced gradients (partition_numel elements)
  virtual void* reduced_into() { return nullptr; }  // what the reducer adds to (Slots)
  void zero() { ctx_.device.fill_zero(all_.data(), all_.bytes(), ctx_.compute); }

 protected:
  GradStore(const ZeroLayout& layout, ZeroContext& context)
      : layout_(layout), ctx_(context), esize_(kernels::dtype_size(context.options.model_dtype)) {}
  uint8_t* at(Buffer<uint8_t>& b, size_t element) { return b.data() + element * esize_; }
  const ZeroLayout& layout_;
  ZeroContext& ctx_;
  size_t esize_;
  Buffer<uint8_t> all_;  // the full buffer (Full) or the partition (Slots)
};

std::unique_ptr<GradStore> make_grad_store(int stage, const ZeroLayout& layout,
                                           const Partitioning& partitioning, ZeroContext& context);

}  // namespace dsx::zero
