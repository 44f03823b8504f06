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

constexpr size_t kMaxBuffers = 3;  // two reductions in flight and the bucket being packed

}  // namespace

GradReducer::GradReducer(Mode mode, const ZeroLayout& layout, const FlatPartition* flat,
                         const ShardedParams* shards, const ZeroOptions& options, comm::Communicator& comm,
                         MemoryLedger& ledger, float* partition, std::function<void(int)> copied)
    : mode_(mode), layout_(layout), flat_(flat), shards_(shards), options_(options), comm_(comm),
      ledger_(ledger), partition_(partition), copied_(std::move(copied)) {
  to_owners_ = flat_ && options.reduce_scatter && options.contiguous_gradients;
  const double n = comm.size();
  if (!options.average_gradients) {
    pre_ = post_ = 1.0f;
  } else if (options.prescale_gradients || to_owners_) {
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
  f.begin = layout_.layer_range(f.entries.back().layer).begin;
  f.end = layout_.layer_range(f.entries.front().layer).end;
  f.route = route_for(f.begin, f.end);
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
  // contiguous_gradients: every kept buffer grows to the largest bucket now, so that the next
  // backward, which packs the same buckets, finds a buffer for each without allocating.
  for (Buffer<uint8_t>& b : spare_) {
    if (b.size() < largest_) b = Buffer<uint8_t>(ledger_, MemoryKind::Buffers, largest_);
  }
}

Range GradReducer::run_of(int rank, size_t begin, size_t end) const {
  const size_t part_begin = flat_->partition_begin(rank);
  const size_t lo = std::max(begin, part_begin);
  const size_t hi = std::min(end, part_begin + flat_->partition_numel());
  return {lo, std::max(lo, hi)};
}

GradReducer::Route GradReducer::route_for(size_t begin, size_t end) const {
  if (mode_ == Mode::ToShards) {
    // DeepSpeed allreduces a stage-3 bucket only with reduce_scatter off and contiguous buffers.
    return options_.reduce_scatter || !options_.contiguous_gradients ? Route::Shards : Route::Allreduce;
  }
  if (!to_owners_ || comm_.size() == 1) return Route::Allreduce;
  // Bytes through the busiest rank, sent + received: a ring allreduce of the bucket moves
  // 4(N-1)/N·n, a ring reduce-scatter of N blocks of the longest run 2(N-1)·longest, and sending
  // every copy to a single owner (N-1)·n into the owner.
  const size_t world = static_cast<size_t>(comm_.size());
  const size_t n = end - begin;
  size_t longest = 0, owners = 0;
  for (int r = 0; r < comm_.size(); ++r) {
    const size_t run = run_of(r, begin, end).size();
    longest = std::max(longest, run);
    owners += run > 0;
  }
  if (owners == 1) return world <= 4 ? Route::ToOwner : Route::Allreduce;
  return world * longest <= 2 * n ? Route::OwnerRuns : Route::Allreduce;
}

// dst (comm dtype) = pre · the bucket's gradients in [lo, hi) of the flat buffer.
void GradReducer::pack_range(const InFlight& f, size_t lo, size_t hi, uint8_t* dst) {
  const DType dtype = options_.comm_dtype;
  const size_t esize = kernels::dtype_size(dtype);
  for (const Entry& e : f.entries) {
    const Range lr = layout_.layer_range(e.layer);
    const size_t a = std::max(lo, lr.begin), b = std::min(hi, lr.end);
    if (a < b) scale_into(dtype, dst + (a - lo) * esize, e.grad + (a - lr.begin), pre_, b - a);
  }
}

void GradReducer::pack(InFlight& f) {
  const DType dtype = options_.comm_dtype;
  const size_t esize = kernels::dtype_size(dtype);
  if (f.route == Route::Shards) {
    pack_shards(f);
    return;
  }
  if (f.route == Route::OwnerRuns) {
    const int world = comm_.size();
    for (int r = 0; r < world; ++r) f.numel = std::max(f.numel, run_of(r, f.begin, f.end).size());
    f.comm = take_buffer(f.numel * static_cast<size_t>(world) * esize);
    for (int r = 0; r < world; ++r) {
      const Range run = run_of(r, f.begin, f.end);
      pack_range(f, run.begin, run.end, f.comm.data() + static_cast<size_t>(r) * f.numel * esize);
    }
    return;
  }
  f.numel = f.end - f.begin;
  if (f.route == Route::ToOwner) {
    // Block r of the owner's buffer receives rank r's copy; the others send only their own.
    for (int r = 0; r < comm_.size(); ++r) {
      if (run_of(r, f.begin, f.end).size() > 0) f.owner = r;
    }
    const bool owner = f.owner == comm_.rank();
    f.comm = take_buffer(f.numel * esize * (owner ? static_cast<size_t>(comm_.size()) : 1));
    pack_range(f, f.begin, f.end, f.comm.data() + (owner ? static_cast<size_t>(f.owner) * f.numel * esize : 0));
    return;
  }
  if (mode_ == Mode::InPlace && dtype == DType::F32) {
    // The entries are views of the full gradient buffer, contiguous from the lowest layer up.
    float* lowest = f.entries.back().grad;
    if (pre_ != 1.0f) kernels::scale(DType::F32, lowest, pre_, f.numel);
    f.in_place = lowest;
    return;
  }
  f.comm = take_buffer(f.numel * esize);
  pack_range(f, f.begin, f.end, f.comm.data());
}

// Rank-major blocks [r0: p1 shard 0, p2 shard 0, ...][r1: p1 shard 1, ...] (stage 3).
void GradReducer::pack_shards(InFlight& f) {
  const DType dtype = options_.comm_dtype;
  const size_t esize = kernels::dtype_size(dtype);
  const int world = comm_.size();
  const size_t first = layout_.layer_first(f.entries.back().layer);
  const size_t last = layout_.layer_last(f.entries.front().layer);
  const size_t shard_begin = shards_->shard_offset(first);
  const size_t k = shards_->shard_offset(last) - shard_begin;
  f.numel = k;
  f.comm = take_buffer(k * static_cast<size_t>(world) * esize);
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
  const size_t world = static_cast<size_t>(comm_.size());
  f.launched = Clock::now();
  ++timing_.operations;
  if (f.route == Route::Allreduce) {
    timing_.bytes += f.numel * esize;
    timing_.bus_bytes += 2.0 * static_cast<double>(world - 1) / static_cast<double>(world) *
                         static_cast<double>(f.numel * esize);
    void* data = f.in_place ? static_cast<void*>(f.in_place) : static_cast<void*>(f.comm.data());
    f.work.push_back(comm_.allreduce(data, f.numel, dtype, kernels::ReduceOp::Sum));
    return;
  }
  const size_t rank = static_cast<size_t>(comm_.rank());
  if (f.route == Route::ToOwner) {
    // The owner receives in rank order; every rank issues its buckets in the same order, so the
    // sends of one bucket never wait on a receive of a later one.
    if (f.owner != comm_.rank()) {
      timing_.bytes += f.numel * esize;
      timing_.bus_bytes += static_cast<double>(f.numel * esize);
      f.work.push_back(comm_.send(f.comm.data(), f.numel, dtype, f.owner));
      return;
    }
    for (int r = 0; r < comm_.size(); ++r) {
      if (r == f.owner) continue;
      timing_.bytes += f.numel * esize;
      f.work.push_back(comm_.recv(f.comm.data() + static_cast<size_t>(r) * f.numel * esize, f.numel, dtype, r));
    }
    return;
  }
  timing_.bytes += f.numel * world * esize;
  timing_.bus_bytes += static_cast<double>((world - 1) * f.numel * esize);
  ++timing_.reduce_scatters;
  f.work.push_back(comm_.reduce_scatter(f.comm.data(), f.comm.data() + rank * f.numel * esize, f.numel, dtype,
                                        kernels::ReduceOp::Sum));
}

void GradReducer::finish_oldest() {
  InFlight& f = in_flight_.front();
  const auto waited_from = Clock::now();
  for (const comm::WorkHandle& w : f.work) w->wait(options_.comm_timeout);
  timing_.exposed_seconds += seconds(Clock::now() - waited_from);
  const auto start = std::max(f.launched, busy_until_);
  auto end = f.launched;
  for (const comm::WorkHandle& w : f.work) end = std::max(end, w->finished_at());
  if (end > start) timing_.busy_seconds += seconds(end - start);
  busy_until_ = std::max(busy_until_, end);
  unpack(f);
  give_back(std::move(f.comm));
  in_flight_.pop_front();
}

void GradReducer::unpack(InFlight& f) {
  const DType dtype = options_.comm_dtype;
  const size_t esize = kernels::dtype_size(dtype);
  const int rank = comm_.rank();
  if (f.route == Route::OwnerRuns) {
    // Only this rank's run came back reduced: stage 1 overwrites its gradients with it, stage 2
    // adds it to the partition (which accumulates over micro-steps).
    const Range mine = run_of(rank, f.begin, f.end);
    const uint8_t* block = f.comm.data() + static_cast<size_t>(rank) * f.numel * esize;
    if (mode_ == Mode::InPlace) {
      float* g = f.entries.back().grad + (mine.begin - f.begin);
      for (size_t j = 0; j < mine.size(); ++j) g[j] = post_ * kernels::load_as_float(dtype, block, j);
    } else {
      float* dst = partition_ + (mine.begin - flat_->partition_begin(rank));
      for (size_t j = 0; j < mine.size(); ++j) dst[j] += post_ * kernels::load_as_float(dtype, block, j);
    }
    return;
  }
  if (f.route == Route::ToOwner) {
    if (f.owner != rank) return;  // its copy went to the owner; nothing comes back
    const size_t n = f.numel;
    auto sum = [&](size_t j) {
      float v = 0.0f;
      for (int r = 0; r < comm_.size(); ++r) v += kernels::load_as_float(dtype, f.comm.data() + static_cast<size_t>(r) * n * esize, j);
      return post_ * v;
    };
    if (mode_ == Mode::InPlace) {
      float* g = f.entries.back().grad;
      for (size_t j = 0; j < n; ++j) g[j] = sum(j);
    } else {
      float* dst = partition_ + (f.begin - flat_->partition_begin(rank));
      for (size_t j = 0; j < n; ++j) dst[j] += sum(j);
    }
    return;
  }
  if (f.route == Route::Shards) {
    const size_t shard_begin = shards_->shard_offset(layout_.layer_first(f.entries.back().layer));
    const uint8_t* mine = f.comm.data() + static_cast<size_t>(rank) * f.numel * esize;
    for (size_t j = 0; j < f.numel; ++j) {
      partition_[shard_begin + j] += post_ * kernels::load_as_float(dtype, mine, j);
    }
    return;
  }
  // Allreduce: every rank holds the whole reduced bucket.
  if (mode_ == Mode::InPlace) {
    float* g = f.entries.back().grad;
    if (dtype != DType::F32) kernels::cast(dtype, f.comm.data(), DType::F32, g, f.numel);
    if (post_ != 1.0f) kernels::scale(DType::F32, g, post_, f.numel);
  } else if (mode_ == Mode::ToPartition) {
    const Range mine = run_of(rank, f.begin, f.end);
    float* dst = partition_ + (mine.begin - flat_->partition_begin(rank));
    for (size_t j = 0; j < mine.size(); ++j) {
      dst[j] += post_ * kernels::load_as_float(dtype, f.comm.data(), mine.begin - f.begin + j);
    }
  } else {
    // Stage 3 keeps, of every parameter in the bucket, the shard this rank stores.
    const size_t first = layout_.layer_first(f.entries.back().layer);
    const size_t last = layout_.layer_last(f.entries.front().layer);
    for (size_t p = first; p < last; ++p) {
      const size_t from = layout_.offset_at(p) - f.begin + shards_->shard_numel(p) * static_cast<size_t>(rank);
      float* dst = partition_ + shards_->shard_offset(p);
      for (size_t j = 0; j < shards_->real_in_shard(p, rank); ++j) {
        dst[j] += post_ * kernels::load_as_float(dtype, f.comm.data(), from + j);
      }
    }
  }
}

// contiguous_gradients: a kept buffer that fits (zeroed: padding must read as zero); when none
// fits, the largest kept one is replaced by a bigger one (the first backward only: at its end
// every kept buffer grows to the largest bucket). Otherwise a new buffer per bucket.
Buffer<uint8_t> GradReducer::take_buffer(size_t bytes) {
  if (options_.contiguous_gradients) {
    largest_ = std::max(largest_, bytes);
    auto best = spare_.end();
    for (auto it = spare_.begin(); it != spare_.end(); ++it) {
      if (it->size() >= bytes && (best == spare_.end() || it->size() < best->size())) best = it;
    }
    if (best != spare_.end()) {
      Buffer<uint8_t> b = std::move(*best);
      spare_.erase(best);
      std::memset(b.data(), 0, bytes);
      return b;
    }
    if (!spare_.empty()) {
      spare_.erase(std::max_element(spare_.begin(), spare_.end(),
                                    [](const auto& a, const auto& b) { return a.size() < b.size(); }));
    }
  }
  return Buffer<uint8_t>(ledger_, MemoryKind::Buffers, bytes);
}

void GradReducer::give_back(Buffer<uint8_t>&& buffer) {
  if (buffer.empty()) return;
  if (options_.contiguous_gradients && spare_.size() < kMaxBuffers) {
    spare_.push_back(std::move(buffer));
  } else {
    buffer.reset();
  }
}

}  // namespace dsx::zero
