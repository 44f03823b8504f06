// The three parameter stores (see param_store.h).
#include "zero/param_store.h"

#include "zero/param_gatherer.h"
#include "zero/partition_allgather.h"

namespace dsx::zero {
namespace {

class FullParams : public ParamStore {
 public:
  FullParams(const ZeroLayout& layout, const Partitioning& partitioning, ZeroContext& context)
      : ParamStore(partitioning, context), layout_(layout), ctx_(context) {}
  const void* acquire(int layer) override {
    return storage_.data() + layout_.layer_range(layer).begin * esize_;
  }
  void after_step() override {}
  void gather_all(void* out) override {
    ctx_.device.copy(out, storage_.data(), layout_.numel() * esize_, ctx_.compute);
    ctx_.compute.synchronize(ctx_.options.comm_timeout);
  }

 protected:
  const ZeroLayout& layout_;
  ZeroContext& ctx_;
};

class FlatParams final : public FullParams {
 public:
  FlatParams(const ZeroLayout& layout, const Partitioning& partitioning, ZeroContext& context)
      : FullParams(layout, partitioning, context),
        flat_(*partitioning.flat()),
        plan_(plan_allgather(flat_, as_count(context.options.allgather_bucket_size))),
        updated_(context.device.create_event()),
        gathered_(context.device.create_event()) {}
  void after_step() override {
    ctx_.order(ctx_.compute, ctx_.comm_stream, *updated_);
    allgather_partitions(flat_, plan_, storage_.data(), ctx_.options.model_dtype, ctx_);
    ctx_.order(ctx_.comm_stream, ctx_.compute, *gathered_);
  }

 private:
  const FlatPartition& flat_;
  AllgatherPlan plan_;
  std::unique_ptr<device::Event> updated_, gathered_;
};

class ShardedStore final : public ParamStore {
 public:
  ShardedStore(const ZeroLayout& layout, const Partitioning& partitioning, ZeroContext& context)
      : ParamStore(partitioning, context) {
    gatherer_ =
        std::make_unique<ParamGatherer>(layout, *partitioning.sharded(), context, storage_.data());
  }
  void prefetch(int layer) override { gatherer_->prefetch(layer); }
  const void* acquire(int layer) override { return gatherer_->acquire(layer); }
  void release(int layer, bool backward) override { gatherer_->release(layer, backward); }
  void after_step() override { gatherer_->invalidate(); }
  void written() override { gatherer_->invalidate(); }
  void gather_all(void* out) override { gatherer_->gather_all(out); }

 private:
  std::unique_ptr<ParamGatherer> gatherer_;
};

}  // namespace

ParamStore::ParamStore(const Partitioning& partitioning, ZeroContext& ctx, bool swapped)
    : context_(ctx),
      partition_offset_(partitioning.partition_offset(ctx.comm.rank())),
      esize_(kernels::dtype_size(ctx.options.model_dtype)),
      master_swapped_(partitioning.sharded() && ctx.options.optimizer_nvme &&
                      ctx.options.optimizer_nvme->swap_master) {
  separate_master_ = swapped || master_swapped_ || ctx.options.model_dtype != kernels::DType::F32;
  if (!swapped)
    storage_ =
        ctx.buffer<uint8_t>(MemoryKind::Params, partitioning.storage_numel() * esize_, ctx.compute);
  // DeepSpeed counts the fp32 master among the optimizer's 12 bytes per parameter.
  if (separate_master_ && !master_swapped_)
    master_ =
        ctx.buffer<float>(MemoryKind::OptimizerState, partitioning.partition_numel(), ctx.compute);
}

void ParamStore::store(size_t offset, const void* src, size_t count) {
  context_.device.copy(storage_.data() + offset * esize_, src, count * esize_, context_.compute);
}

kernels::ParamCopy ParamStore::working_copy() {
  return {context_.options.model_dtype, working_partition()};
}

void ParamStore::refresh_working() {
  context_.device.cast(kernels::DType::F32, master(), context_.options.model_dtype,
                       working_partition(), master_.size(), context_.compute);
}

std::unique_ptr<ParamStore> make_param_store(const ZeroLayout& layout,
                                             const Partitioning& partitioning,
                                             ZeroContext& context) {
  if (partitioning.sharded() && context.options.param_nvme)
    return make_swapped_store(layout, partitioning, context);
  if (partitioning.sharded()) return std::make_unique<ShardedStore>(layout, partitioning, context);
  if (partitioning.flat()) return std::make_unique<FlatParams>(layout, partitioning, context);
  return std::make_unique<FullParams>(layout, partitioning, context);
}

}  // namespace dsx::zero
