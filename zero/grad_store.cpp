// The two gradient stores (see grad_store.h).
#include "zero/grad_store.h"

namespace dsx::zero {
namespace {

class FullGrads final : public GradStore {
 public:
  FullGrads(const ZeroLayout& layout, const Partitioning& partitioning, ZeroContext& context)
      : GradStore(layout, context), offset_(partitioning.partition_offset(context.comm.rank())) {
    all_ = ctx_.buffer<uint8_t>(MemoryKind::Grads, partitioning.storage_numel() * esize_,
                                ctx_.compute);
  }
  void* grad(int, size_t offset) override { return at(all_, offset); }
  bool reduces(bool boundary) const override { return boundary; }
  GradReducer::Mode mode() const override { return GradReducer::Mode::InPlace; }
  void* partition() override { return at(all_, offset_); }

 private:
  size_t offset_;
};

class SlotGrads final : public GradStore {
 public:
  SlotGrads(const ZeroLayout& layout, const Partitioning& partitioning, ZeroContext& context,
            GradReducer::Mode mode)
      : GradStore(layout, context), mode_(mode), slots_(static_cast<size_t>(layout.num_layers())) {
    all_ = ctx_.buffer<uint8_t>(MemoryKind::Grads, partitioning.partition_numel() * esize_,
                                ctx_.compute);
  }
  void* grad(int layer, size_t offset) override {
    Buffer<uint8_t>& slot = slots_[static_cast<size_t>(layer)];
    if (slot.empty())
      slot = ctx_.buffer<uint8_t>(MemoryKind::Buffers, layout_.layer_numel(layer) * esize_,
                                  ctx_.compute);
    return at(slot, offset - layout_.layer_range(layer).begin);
  }
  bool reduces(bool) const override { return true; }
  GradReducer::Mode mode() const override { return mode_; }
  void packed(int layer) override { slots_[static_cast<size_t>(layer)].reset(ctx_.comm_stream); }
  void* partition() override { return all_.data(); }
  void* reduced_into() override { return all_.data(); }

 private:
  GradReducer::Mode mode_;
  std::vector<Buffer<uint8_t>> slots_;
};

}  // namespace

std::unique_ptr<GradStore> make_grad_store(int stage, const ZeroLayout& layout,
                                           const Partitioning& partitioning, ZeroContext& context) {
  if (stage <= 1) return std::make_unique<FullGrads>(layout, partitioning, context);
  const auto mode = stage == 2 ? GradReducer::Mode::ToPartition : GradReducer::Mode::ToShards;
  return std::make_unique<SlotGrads>(layout, partitioning, context, mode);
}

}  // namespace dsx::zero
