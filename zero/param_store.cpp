// The three parameter stores (see param_store.h).
#include "zero/param_store.h"

#include "zero/param_gatherer.h"
#include "zero/partition_allgather.h"

namespace dsx::zero {
namespace {

class FullParams : public ParamStore {
 public:
  FullParams(const ZeroLayout& layout, const Partitioning& partitioning, ZeroContext& context)
      : layout_(layout), ctx_(context) {
    storage_ = ctx_.buffer<float>(MemoryKind::Params, partitioning.storage_numel(), ctx_.compute);
  }
  const float* acquire(int layer) override { return storage_.data() + layout_.layer_range(layer).begin; }
  void after_step() override {}
  void gather_all(float* out) override {
    ctx_.device.copy(out, storage_.data(), layout_.numel() * sizeof(float), ctx_.compute);
    ctx_.compute.synchronize(ctx_.options.comm_timeout);
  }

 protected:
  const ZeroLayout& layout_;
  ZeroContext& ctx_;
};

class FlatParams final : public FullParams {
 public:
  FlatParams(const ZeroLayout& layout, const Partitioning& partitioning, ZeroContext& context)
      : FullParams(layout, partitioning, context), flat_(*partitioning.flat()),
        plan_(plan_allgather(flat_, context.options.allgather_bucket_size)), updated_(context.device.create_event()),
        gathered_(context.device.create_event()) {}
  void after_step() override {
    ctx_.order(ctx_.compute, ctx_.comm_stream, *updated_);
    allgather_partitions(flat_, plan_, storage_.data(), ctx_);
    ctx_.order(ctx_.comm_stream, ctx_.compute, *gathered_);
  }

 private:
  const FlatPartition& flat_;
  AllgatherPlan plan_;
  std::unique_ptr<device::Event> updated_, gathered_;
};

class ShardedStore final : public ParamStore {
 public:
  ShardedStore(const ZeroLayout& layout, const Partitioning& partitioning, ZeroContext& context) {
    storage_ = context.buffer<float>(MemoryKind::Params, partitioning.storage_numel(), context.compute);
    gatherer_ = std::make_unique<ParamGatherer>(layout, *partitioning.sharded(), context, storage_.data());
  }
  void prefetch(int layer) override { gatherer_->prefetch(layer); }
  const float* acquire(int layer) override { return gatherer_->acquire(layer); }
  void release(int layer, bool backward) override { gatherer_->release(layer, backward); }
  void after_step() override { gatherer_->invalidate(); }
  void written() override { gatherer_->invalidate(); }
  void gather_all(float* out) override { gatherer_->gather_all(out); }

 private:
  std::unique_ptr<ParamGatherer> gatherer_;
};

}  // namespace

std::unique_ptr<ParamStore> make_param_store(const ZeroLayout& layout, const Partitioning& partitioning,
                                             ZeroContext& context) {
  if (partitioning.sharded()) return std::make_unique<ShardedStore>(layout, partitioning, context);
  if (partitioning.flat()) return std::make_unique<FlatParams>(layout, partitioning, context);
  return std::make_unique<FullParams>(layout, partitioning, context);
}

}  // namespace dsx::zero
