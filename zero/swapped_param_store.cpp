// Stage 3 with the parameter shards in a swap file (offload_param.device "nvme"; see
// param_store.h and param_swapper.h). The fp32 master partition is the one copy the step
// updates; after it, the working copy (the model's dtype) is written to the swap file, from
// which each gather reads its layer.
#include <algorithm>
#include <vector>

#include "dsx/error.h"
#include "kernels/mixed_precision.h"
#include "zero/param_gatherer.h"
#include "zero/param_store.h"
#include "zero/param_swapper.h"

namespace dsx::zero {
namespace {

// Each layer's elements of this rank's packed shards.
std::vector<std::pair<size_t, size_t>> layer_shards(const ZeroLayout& layout,
                                                    const ShardedParams& shards) {
  std::vector<std::pair<size_t, size_t>> ranges;
  for (int l = 0; l < layout.num_layers(); ++l) {
    ranges.emplace_back(shards.shard_offset(layout.layer_first(l)),
                        shards.shard_offset(layout.layer_last(l)));
  }
  return ranges;
}

const ParamSwapOptions& checked(ZeroContext& ctx) {
  if (!ctx.device.host_accessible()) {
    throw Error(ErrorKind::Unsupported,
                "zero_optimization.offload_param.device \"nvme\" on " + ctx.device.name() +
                    ": dsx swaps parameters for host-memory ranks only. Run on the CPU, or use "
                    "offload_param.device \"none\"");
  }
  return *ctx.options.param_nvme;
}

class SwappedStore final : public ParamStore {
 public:
  SwappedStore(const ZeroLayout& layout, const Partitioning& partitioning, ZeroContext& ctx)
      : ParamStore(partitioning, ctx, /*swapped=*/true),
        numel_(partitioning.partition_numel()),
        swapper_(std::make_unique<ParamSwapper>(checked(ctx),
                                                layer_shards(layout, *partitioning.sharded()),
                                                numel_, esize_, ctx.comm.rank(), ctx.ledger)),
        gatherer_(std::make_unique<ParamGatherer>(layout, *partitioning.sharded(), ctx, nullptr,
                                                  swapper_.get())) {}

  void prefetch(int layer) override { gatherer_->prefetch(layer); }
  const void* acquire(int layer) override { return gatherer_->acquire(layer); }
  void release(int layer, bool backward) override { gatherer_->release(layer, backward); }
  void after_step() override {
    refresh_working();
    gatherer_->invalidate();
  }
  void written() override { gatherer_->invalidate(); }
  void gather_all(void* out) override { gatherer_->gather_all(out); }
  // Initial values: straight to the swap file (host memory in, on the host, now).
  void store(size_t offset, const void* src, size_t count) override {
    swapper_->write(offset, count, src);
  }
  kernels::ParamCopy working_copy() override { return {context_.options.model_dtype, nullptr}; }
  void refresh_working() override;
  void master_stepped(size_t begin, size_t count, const float* master) override {
    write_master(begin, count, master);
  }

 private:
  // Master values of elements [begin, begin + count) to the swap file, in the model's dtype.
  void write_master(size_t begin, size_t count, const float* master);

  size_t numel_;
  std::unique_ptr<ParamSwapper> swapper_;    // before the gatherer: its reads use it
  std::unique_ptr<ParamGatherer> gatherer_;  // destroyed first: it waits for its reads
};

// The step's kernels (or a checkpoint's load) wrote the master on the compute stream: once they
// ran, its values go to the swap file. A master in the optimizer's swap files reached it group
// by group already (master_stepped).
void SwappedStore::refresh_working() {
  context_.compute.synchronize(context_.options.comm_timeout);
  if (!master_swapped()) write_master(0, numel_, master_.data());
}

void SwappedStore::write_master(size_t begin, size_t count, const float* master) {
  const kernels::DType dtype = context_.options.model_dtype;
  if (dtype == kernels::DType::F32) return swapper_->write(begin, count, master);
  constexpr size_t kSlice = 1 << 20;
  std::vector<uint8_t> rounded(std::min(count, kSlice) * esize_);
  for (size_t lo = 0; lo < count; lo += kSlice) {
    const size_t n = std::min(kSlice, count - lo);
    kernels::cast(kernels::DType::F32, master + lo, dtype, rounded.data(), n);
    swapper_->write(begin + lo, n, rounded.data());
  }
}

}  // namespace

std::unique_ptr<ParamStore> make_swapped_store(const ZeroLayout& layout,
                                               const Partitioning& partitioning,
                                               ZeroContext& context) {
  return std::make_unique<SwappedStore>(layout, partitioning, context);
}

}  // namespace dsx::zero
