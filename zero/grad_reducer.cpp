// Gradient buckets and their reductions (see grad_reducer.h).
#include "zero/grad_reducer.h"

#include <algorithm>
#include <cstring>

#include "kernels/mixed_precision.h"
#include "kernels/reduce.h"

namespace dsx::zero {
namespace {

using Clock = std::chrono::steady_clock;
using kernels::DType;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// dst (dtype) = src (fp32), multiplying src by `factor` first (src is ours to change).
void scale_into(DType dtype, void* dst, float* src, float factor, size_t count) {
  if (factor != 1.0f) kernels::scale(DType::F32, src, factor, count);
  if (dtype == DType::F32) {
    std::memcpy(dst, src, count * sizeof(float));
  } else {
    kernels::cast(DType::F32, src, dtype, dst, count);
  }
}

}  // namespace

GradReducer::GradReducer(Mode mode, const ZeroLayout& layout, const FlatPartition* flat,
                         const ShardedParams* shards, const ZeroOptions& options, comm::Communicator& comm,
                         MemoryLedger& ledger, float* partition, std::function<void(int)> copied)
    : mode_(mode), layout_(layout), flat_(flat), shards_(shards), options_(options), comm_(comm),
      ledger_(ledger), partition_(partition), copied_(std::move(copied)) {
  const double n = comm.size();
  if (!options.average_gradients) {
    pre_ = post_ = 1.0f;
  } else if (options.prescale_gradients) {
    pre_ = static_cast<float>(1.0 / n);
    post_ = 1.0f;
  } else {
    pre_ = static_cast<float>(1.0 / options.gradient_predivide_factor);
    post_ = static_cast<float>(options.gradient_predivide_factor / n);
  }
}

size_t GradReducer::bucket_numel() const {
  size_t n = 0;
  for (const Entry& e : open_) n += layout_.layer_numel(e.layer);
  return n;
}

void GradReducer::add(int layer, float* grad) {
  const size_t numel = layout_.layer_numel(layer);
  if (numel == 0) {
    copied_(layer);
    return;
  }
  if (!open_.empty()) {
    // A bucket is a contiguous range: layers arrive from the last one down.
    const bool adjacent = layout_.layer_range(open_.back().layer).begin == layout_.layer_range(layer).end;
    if (!adjacent || bucket_numel() + numel > options_.reduce_bucket_size) flush();
  }
  open_.push_back({layer, grad});
  if (bucket_numel() >= options_.reduce_bucket_size) flush();
}

void GradReducer::flush() {
  if (open_.empty()) return;
  InFlight f;
  f.entries = std::move(open_);
  open_.clear();
  pack(f);
  for (const Entry& e : f.entries) copied_(e.layer);
  launch(f);
  in_flight_.push_back(std::move(f));
  // Without overlap the reduction is waited for now; with it, at most two stay in flight.
  const size_t limit = options_.overlap_comm ? 2 : 0;
  while (in_flight_.size() > limit) finish_oldest();
}

void GradReducer::flush_and_wait() {
  flush();
  while (!in_flight_.empty()) finish_oldest();
}

void GradReducer::pack(InFlight& f) {
  const DType dtype = options_.comm_dtype;
  const size_t esize = kernels::dtype_size(dtype);
  const Entry& lowest = f.entries.back();
  const size_t bucket_begin = layout_.layer_range(lowest.layer).begin;
  const size_t bucket_end = layout_.layer_range(f.entries.front().layer).end;
  if (mode_ == Mode::InPlace) {
    // The entries are views of the full gradient buffer, contiguous from the lowest layer up.
    f.numel = bucket_end - bucket_begin;
    if (dtype == DType::F32) {
      if (pre_ != 1.0f) kernels::scale(DType::F32, lowest.grad, pre_, f.numel);
      f.in_place = lowest.grad;
    } else {
      f.comm = Buffer<uint8_t>(ledger_, MemoryKind::Buffers, f.numel * esize);
      scale_into(dtype, f.comm.data(), lowest.grad, pre_, f.numel);
    }
    return;
  }
  if (mode_ == Mode::ToPartition) {
    f.numel = bucket_end - bucket_begin;
    f.comm = Buffer<uint8_t>(ledger_, MemoryKind::Buffers, f.numel * esize);
    for (const Entry& e : f.entries) {
      const Range r = layout_.layer_range(e.layer);
      scale_into(dtype, f.comm.data() + (r.begin - bucket_begin) * esize, e.grad, pre_, r.size());
    }
    return;
  }
  // ToShards: rank-major blocks [r0: p1 shard 0, p2 shard 0, ...][r1: p1 shard 1, ...].
  const int world = comm_.size();
  const size_t first = layout_.layer_first(lowest.layer);
  const size_t last = layout_.layer_last(f.entries.front().layer);
  const size_t shard_begin = shards_->shard_offset(first);
  const size_t k = shards_->shard_offset(last) - shard_begin;
  f.numel = k;
  f.comm = Buffer<uint8_t>(ledger_, MemoryKind::Buffers, k * static_cast<size_t>(world) * esize);
  for (const Entry& e : f.entries) {
    const Range lr = layout_.layer_range(e.layer);
    if (pre_ != 1.0f) kernels::scale(DType::F32, e.grad, pre_, lr.size());
    for (size_t p = layout_.layer_first(e.layer); p < layout_.layer_last(e.layer); ++p) {
      const float* g = e.grad + (layout_.offset_at(p) - lr.begin);
      const size_t s = shards_->shard_numel(p);
      for (int r = 0; r < world; ++r) {
        const size_t real = shards_->real_in_shard(p, r);
        if (real == 0) continue;
        uint8_t* dst = f.comm.data() + (static_cast<size_t>(r) * k + shards_->shard_offset(p) - shard_begin) * esize;
        const float* src = g + static_cast<size_t>(r) * s;
        if (dtype == DType::F32) {
          std::memcpy(dst, src, real * sizeof(float));
        } else {
          kernels::cast(DType::F32, src, dtype, dst, real);
        }
      }
    }
  }
}

void GradReducer::launch(InFlight& f) {
  const DType dtype = options_.comm_dtype;
  const size_t esize = kernels::dtype_size(dtype);
  f.launched = Clock::now();
  ++timing_.operations;
  if (mode_ == Mode::ToShards) {
    const size_t rank = static_cast<size_t>(comm_.rank());
    timing_.bytes += f.numel * static_cast<size_t>(comm_.size()) * esize;
    f.work = comm_.reduce_scatter(f.comm.data(), f.comm.data() + rank * f.numel * esize, f.numel, dtype,
                                  kernels::ReduceOp::Sum);
    return;
  }
  timing_.bytes += f.numel * esize;
  void* data = f.in_place ? static_cast<void*>(f.in_place) : static_cast<void*>(f.comm.data());
  f.work = comm_.allreduce(data, f.numel, dtype, kernels::ReduceOp::Sum);
}

void GradReducer::finish_oldest() {
  InFlight& f = in_flight_.front();
  const auto waited_from = Clock::now();
  f.work->wait(options_.comm_timeout);
  timing_.exposed_seconds += seconds(Clock::now() - waited_from);
  const auto start = std::max(f.launched, busy_until_);
  const auto end = f.work->finished_at();
  if (end > start) timing_.busy_seconds += seconds(end - start);
  busy_until_ = std::max(busy_until_, end);
  unpack(f);
  in_flight_.pop_front();
}

void GradReducer::unpack(InFlight& f) {
  const DType dtype = options_.comm_dtype;
  const size_t esize = kernels::dtype_size(dtype);
  if (mode_ == Mode::InPlace) {
    float* g = f.entries.back().grad;
    if (dtype != DType::F32) kernels::cast(dtype, f.comm.data(), DType::F32, g, f.numel);
    if (post_ != 1.0f) kernels::scale(DType::F32, g, post_, f.numel);
    return;
  }
  if (mode_ == Mode::ToPartition) {
    const size_t bucket_begin = layout_.layer_range(f.entries.back().layer).begin;
    const size_t bucket_end = bucket_begin + f.numel;
    const size_t part_begin = flat_->partition_begin(comm_.rank());
    const size_t part_end = part_begin + flat_->partition_numel();
    const size_t lo = std::max(bucket_begin, part_begin);
    const size_t hi = std::min(bucket_end, part_end);
    for (size_t i = lo; i < hi; ++i) {
      partition_[i - part_begin] += post_ * kernels::load_as_float(dtype, f.comm.data(), i - bucket_begin);
    }
    return;
  }
  const size_t first = layout_.layer_first(f.entries.back().layer);
  const size_t shard_begin = shards_->shard_offset(first);
  const uint8_t* mine = f.comm.data() + static_cast<size_t>(comm_.rank()) * f.numel * esize;
  for (size_t j = 0; j < f.numel; ++j) {
    partition_[shard_begin + j] += post_ * kernels::load_as_float(dtype, mine, j);
  }
}

}  // namespace dsx::zero
