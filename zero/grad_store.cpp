// The two gradient stores (see grad_store.h).
#include "zero/grad_store.h"

namespace dsx::zero {
namespace {

class FullGrads final : public GradStore {
 public:
  FullGrads(const ZeroLayout& layout, const Partitioning& partitioning, ZeroContext& context)
      : GradStore(layout, context),
        offset_(partitioning.partition_offset(context.comm.rank())) {
    all_ = ctx_.buffer<float>(MemoryKind::Grads, partitioning.storage_numel(), ctx_.compute);
  }
  float* grad(int, size_t offset) override { return all_.data() + offset; }
  bool reduces(bool boundary) const override { return boundary; }
  GradReducer::Mode mode() const override { return GradReducer::Mode::InPlace; }
  float* partition() override { return all_.data() + offset_; }

 private:
  size_t offset_;
};

class SlotGrads final : public GradStore {
 public:
  SlotGrads(const ZeroLayout& layout, const Partitioning& partitioning, ZeroContext& context, GradReducer::Mode mode)
      : GradStore(layout, context), mode_(mode), slots_(static_cast<size_t>(layout.num_layers())) {
    all_ = ctx_.buffer<float>(MemoryKind::Grads, partitioning.partition_numel(), ctx_.compute);
  }
  float* grad(int layer, size_t offset) override {
    Buffer<float>& slot = slots_[static_cast<size_t>(layer)];
    if (slot.empty()) slot = ctx_.buffer<float>(MemoryKind::Buffers, layout_.layer_numel(layer), ctx_.compute);
    return slot.data() + (offset - layout_.layer_range(layer).begin);
  }
  bool reduces(bool) const override { return true; }
  GradReducer::Mode mode() const override { return mode_; }
  void packed(int layer) override { slots_[static_cast<size_t>(layer)].reset(ctx_.comm_stream); }
  float* partition() override { return all_.data(); }
  float* reduced_into() override { return all_.data(); }

 private:
  GradReducer::Mode mode_;
  std::vector<Buffer<float>> slots_;
};

}  // namespace

std::unique_ptr<GradStore> make_grad_store(int stage, const ZeroLayout& layout, const Partitioning& partitioning,
                                           ZeroContext& context) {
  if (stage <= 1) return std::make_unique<FullGrads>(layout, partitioning, context);
  const auto mode = stage == 2 ? GradReducer::Mode::ToPartition : GradReducer::Mode::ToShards;
  return std::make_unique<SlotGrads>(layout, partitioning, context, mode);
}

}  // namespace dsx::zero
