// Gradient buckets and their reductions (see grad_reducer.h).
#include "zero/grad_reducer.h"

#include <algorithm>
#include <array>
#include <string>

#include "trace/trace.h"

namespace dsx::zero {
namespace {

using Clock = std::chrono::steady_clock;
using kernels::DType;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Buffers kept for the next buckets: a bucket packs, reduces and unpacks on the communication
// stream, so its buffer serves the next bucket in that stream's order and one would do; three
// leave room for buckets of different sizes.
constexpr size_t kMaxBuffers = 3;

}  // namespace

GradReducer::GradReducer(Mode mode, const ZeroLayout& layout, const Partitioning& partitioning,
                         ZeroContext& context, void* partition, std::function<void(int)> copied)
    : mode_(mode),
      layout_(layout),
      flat_(partitioning.flat()),
      shards_(partitioning.sharded()),
      ctx_(context),
      options_(context.options),
      comm_(context.comm),
      device_(context.device),
      stream_(context.comm_stream),
      partition_(partition),
      copied_(std::move(copied)),
      grads_written_(context.device.create_event()),
      reduced_(context.device.create_event()) {
  to_owners_ = flat_ && options_.reduce_scatter && options_.contiguous_gradients;
  const double n = comm_.size();
  if (!options_.average_gradients) {
    pre_ = post_ = 1.0f;
  } else if (options_.prescale_gradients || to_owners_) {
    pre_ = static_cast<float>(1.0 / n);
    post_ = 1.0f;
  } else {
    pre_ = static_cast<float>(1.0 / options_.gradient_predivide_factor);
    post_ = static_cast<float>(options_.gradient_predivide_factor / n);
  }
}

GradReducer::~GradReducer() {
  // Reductions still queued read and write our buffers: let them land before the buffers go.
  try {
    stream_.synchronize(options_.comm_timeout);
  } catch (...) {
    // the failure was (or will be) reported by whoever waited for it
  }
}

size_t GradReducer::bucket_numel() const {
  size_t n = 0;
  for (const Entry& e : open_) n += layout_.layer_numel(e.layer);
  return n;
}

void GradReducer::add(int layer, void* grad) {
  const size_t numel = layout_.layer_numel(layer);
  if (numel == 0) {
    copied_(layer);
    return;
  }
  if (!open_.empty()) {
    // A bucket is a contiguous range: layers arrive from the last one down.
    const bool adjacent =
        layout_.layer_range(open_.back().layer).begin == layout_.layer_range(layer).end;
    if (!adjacent || bucket_numel() + numel > bucket_limit()) flush();
  }
  open_.push_back({layer, grad});
  if (bucket_numel() >= bucket_limit()) flush();
}

void GradReducer::flush() {
  if (open_.empty()) return;
  InFlight f;
  f.ready = Clock::now();
  f.entries = std::move(open_);
  open_.clear();
  f.plan = &plan_for(f.entries);
  // The communication stream starts on the bucket once the compute stream has written it.
  ctx_.order(ctx_.compute, stream_, *grads_written_);
  f.events = take_bucket_events();
  stream_.record(*bucket_events_[f.events].begun);
  time_stamp(f.started);
  pack(f);
  for (const Entry& e : f.entries) copied_(e.layer);
  launch(f);
  unpack(f);
  // The next bucket takes the buffer in the communication stream's order, after this one is
  // unpacked: no host wait recycles it.
  give_back(std::move(f.comm));
  launched_.push_back(std::move(f));
  // Without overlap the reduction is waited for now (DeepSpeed's overlap_comm false); with it,
  // backward goes on and the host never waits for a bucket.
  if (!options_.overlap_comm) {
    stream_.record(*reduced_);
    const auto waited_from = Clock::now();
    ctx_.wait_for(*reduced_, "a gradient reduction");
    waited(waited_from);
    settle();
  }
}

void GradReducer::flush_and_order() {
  flush();
  // The optimizer and the next backward (on the compute stream) read what the reductions wrote:
  // an edge between the streams. A GPU's host goes on; the cpu device's compute stream is the
  // caller, which stands here until the reductions are done: the exposed communication.
  const auto waited_from = Clock::now();
  ctx_.order(stream_, ctx_.compute, *grads_written_);
  waited(waited_from);
  // contiguous_gradients: every kept buffer grows to the largest bucket now, so that the next
  // backward, which packs the same buckets, finds a buffer for each without allocating.
  for (Buffer<uint8_t>& b : spare_) {
    if (b.size() < largest_) b = ctx_.buffer<uint8_t>(MemoryKind::Buffers, largest_, stream_);
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
    return options_.reduce_scatter || !options_.contiguous_gradients ? Route::Shards
                                                                     : Route::Allreduce;
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

const GradReducer::Plan& GradReducer::plan_for(const std::vector<Entry>& entries) {
  const int low = entries.back().layer, high = entries.front().layer;
  const size_t begin = layout_.layer_range(low).begin, end = layout_.layer_range(high).end;
  auto [it, fresh] = plans_.try_emplace({begin, end});
  Plan& p = it->second;
  if (!fresh) return p;
  const size_t world = static_cast<size_t>(comm_.size());
  p.begin = begin;
  p.end = end;
  p.route = route_for(begin, end);
  switch (p.route) {
    case Route::Shards: {
      const size_t first = layout_.layer_first(low);
      const size_t last = layout_.layer_last(high);
      p.numel = shards_->shard_offset(last) - shards_->shard_offset(first);
      p.buffer_bytes = p.numel * world * esize();
      break;
    }
    case Route::OwnerRuns:
      for (int r = 0; r < comm_.size(); ++r) {
        p.runs.push_back(run_of(r, begin, end));
        p.numel = std::max(p.numel, p.runs.back().size());
      }
      p.buffer_bytes = p.numel * world * esize();
      break;
    case Route::ToOwner:
      p.numel = end - begin;
      for (int r = 0; r < comm_.size(); ++r) {
        if (run_of(r, begin, end).size() > 0) p.owner = r;
      }
      // Block r of the owner's buffer receives rank r's copy; the others send only their own.
      p.buffer_bytes = p.numel * esize() * (p.owner == comm_.rank() ? world : 1);
      break;
    case Route::Allreduce: {
      p.numel = end - begin;
      const bool in_place = mode_ == Mode::InPlace && options_.comm_dtype == options_.model_dtype;
      p.buffer_bytes = in_place ? 0 : p.numel * esize();
      break;
    }
  }
  return p;
}

// dst (comm dtype) = pre · the bucket's gradients in [lo, hi) of the flat buffer. In one pass
// where the dtypes agree (the same fp32 product, rounded once, as scale then copy: half the
// memory traffic); otherwise the gradients are scaled in place first (they are ours until
// copied_), so a 16-bit model's are rounded to its dtype before the cast, as DeepSpeed's are.
void GradReducer::pack_range(const InFlight& f, size_t lo, size_t hi, uint8_t* dst) {
  const DType dtype = options_.model_dtype;
  const bool one_pass = pre_ != 1.0f && options_.comm_dtype == dtype;
  for (const Entry& e : f.entries) {
    const Range lr = layout_.layer_range(e.layer);
    const size_t a = std::max(lo, lr.begin), b = std::min(hi, lr.end);
    if (a >= b) continue;
    void* src = at(e.grad, a - lr.begin);
    uint8_t* to = dst + (a - lo) * esize();
    if (one_pass) {
      device_.sum_blocks(dtype, src, 1, 0, pre_, dtype, to, b - a, false, stream_);
      continue;
    }
    if (pre_ != 1.0f) device_.scale(dtype, src, pre_, b - a, stream_);
    copy_as(src, to, b - a);
  }
}

void GradReducer::copy_as(const void* src, void* dst, size_t count) {
  if (options_.comm_dtype == options_.model_dtype) {
    device_.copy(dst, src, count * esize(), stream_);
  } else {
    device_.cast(options_.model_dtype, src, options_.comm_dtype, dst, count, stream_);
  }
}

void GradReducer::pack(InFlight& f) {
  const Plan& p = *f.plan;
  // Only the owner-runs blocks are written whole here (their padding included); the other
  // routes leave gaps that must read as zero.
  if (p.buffer_bytes > 0) f.comm = take_buffer(p.buffer_bytes, p.route != Route::OwnerRuns);
  switch (p.route) {
    case Route::Shards:
      pack_shards(f);
      return;
    case Route::OwnerRuns:
      // Each block is rank r's run, then zeros up to the longest run (take_buffer left them).
      for (size_t r = 0; r < p.runs.size(); ++r) {
        uint8_t* block = f.comm.data() + r * p.numel * esize();
        pack_range(f, p.runs[r].begin, p.runs[r].end, block);
        const size_t run = p.runs[r].size();
        if (run < p.numel)
          device_.fill_zero(block + run * esize(), (p.numel - run) * esize(), stream_);
      }
      return;
    case Route::ToOwner: {
      const bool owner = p.owner == comm_.rank();
      pack_range(f, p.begin, p.end,
                 f.comm.data() + (owner ? static_cast<size_t>(p.owner) * p.numel * esize() : 0));
      return;
    }
    case Route::Allreduce:
      if (p.buffer_bytes == 0) {
        // The entries are views of the full gradient buffer, contiguous from the lowest layer up.
        f.in_place = f.entries.back().grad;
        if (pre_ != 1.0f) device_.scale(options_.model_dtype, f.in_place, pre_, p.numel, stream_);
        return;
      }
      pack_range(f, p.begin, p.end, f.comm.data());
      return;
  }
}

// Rank-major blocks [r0: p1 shard 0, p2 shard 0, ...][r1: p1 shard 1, ...] (stage 3).
void GradReducer::pack_shards(InFlight& f) {
  const int world = comm_.size();
  const size_t k = f.plan->numel;
  const size_t shard_begin = shards_->shard_offset(layout_.layer_first(f.entries.back().layer));
  for (const Entry& e : f.entries) {
    const Range lr = layout_.layer_range(e.layer);
    if (pre_ != 1.0f) device_.scale(options_.model_dtype, e.grad, pre_, lr.size(), stream_);
    for (size_t p = layout_.layer_first(e.layer); p < layout_.layer_last(e.layer); ++p) {
      const size_t g = layout_.offset_at(p) - lr.begin;
      const size_t s = shards_->shard_numel(p);
      for (int r = 0; r < world; ++r) {
        const size_t real = shards_->real_in_shard(p, r);
        if (real == 0) continue;
        uint8_t* dst =
            f.comm.data() +
            (static_cast<size_t>(r) * k + shards_->shard_offset(p) - shard_begin) * esize();
        copy_as(at(e.grad, g + static_cast<size_t>(r) * s), dst, real);
      }
    }
  }
}

void GradReducer::launch(InFlight& f) {
  const Plan& p = *f.plan;
  const DType dtype = options_.comm_dtype;
  const size_t bytes = p.numel * esize();
  const size_t world = static_cast<size_t>(comm_.size());
  ++timing_.operations;
  switch (p.route) {
    case Route::Allreduce: {
      timing_.bytes += bytes;
      timing_.bus_bytes += 2.0 * static_cast<double>(world - 1) / static_cast<double>(world) *
                           static_cast<double>(bytes);
      void* data = f.in_place ? static_cast<void*>(f.in_place) : static_cast<void*>(f.comm.data());
      comm_.allreduce_on(device_, stream_, data, p.numel, dtype, kernels::ReduceOp::Sum);
      break;
    }
    case Route::ToOwner:
      // The owner receives in rank order; every rank issues its buckets in the same order, so the
      // sends of one bucket never wait on a receive of a later one.
      if (p.owner != comm_.rank()) {
        timing_.bytes += bytes;
        timing_.bus_bytes += static_cast<double>(bytes);
        comm_.send_on(device_, stream_, f.comm.data(), p.numel, dtype, p.owner);
        break;
      }
      for (int r = 0; r < comm_.size(); ++r) {
        if (r == p.owner) continue;
        timing_.bytes += bytes;
        comm_.recv_on(device_, stream_, f.comm.data() + static_cast<size_t>(r) * bytes, p.numel,
                      dtype, r);
      }
      break;
    case Route::OwnerRuns:
    case Route::Shards: {
      const size_t rank = static_cast<size_t>(comm_.rank());
      timing_.bytes += bytes * world;
      timing_.bus_bytes += static_cast<double>((world - 1) * bytes);
      ++timing_.reduce_scatters;
      comm_.reduce_scatter_on(device_, stream_, f.comm.data(), f.comm.data() + rank * bytes,
                              p.numel, dtype, kernels::ReduceOp::Sum);
      break;
    }
  }
  // When the collective finished, for the share of communication hidden behind backward.
  stream_.record(*bucket_events_[f.events].finished);
  time_stamp(f.finished);
}

// Traced runs only: the host's clock when the communication stream reaches this point, by a host
// callback (the trace's spans are in the host's clock; timed events are not).
void GradReducer::time_stamp(std::shared_ptr<Clock::time_point>& at) {
  if (!trace::recording()) return;
  at = std::make_shared<Clock::time_point>();
  device_.host_task(stream_, [at] { *at = Clock::now(); }, {}, "time stamp");
}

// A free pair of timed events for the next bucket: pairs free up when settle() has read them.
size_t GradReducer::take_bucket_events() {
  const size_t index = launched_.size();
  if (index == bucket_events_.size())
    bucket_events_.push_back({device_.create_timed_event(), device_.create_timed_event()});
  return index;
}

void GradReducer::unpack(InFlight& f) {
  const Plan& p = *f.plan;
  const DType dtype = options_.comm_dtype;
  const int rank = comm_.rank();
  const DType gdt = options_.model_dtype;
  auto partition_at = [&](size_t flat_offset) {
    return at(partition_, flat_offset - flat_->partition_begin(rank));
  };
  switch (p.route) {
    case Route::OwnerRuns: {
      // Only this rank's run came back reduced: stage 1 overwrites its gradients with it, stage 2
      // adds it to the partition (which accumulates over micro-steps).
      const Range mine = p.runs[static_cast<size_t>(rank)];
      if (mine.size() == 0) return;
      const uint8_t* block = f.comm.data() + static_cast<size_t>(rank) * p.numel * esize();
      if (mode_ == Mode::InPlace) {
        device_.sum_blocks(dtype, block, 1, 0, post_, gdt,
                           at(f.entries.back().grad, mine.begin - p.begin), mine.size(), false,
                           stream_);
      } else {
        device_.sum_blocks(dtype, block, 1, 0, post_, gdt, partition_at(mine.begin), mine.size(),
                           true, stream_);
      }
      return;
    }
    case Route::ToOwner:
      if (p.owner != rank) return;  // its copy went to the owner; nothing comes back
      if (mode_ == Mode::InPlace) {
        device_.sum_blocks(dtype, f.comm.data(), static_cast<size_t>(comm_.size()), p.numel, post_,
                           gdt, f.entries.back().grad, p.numel, false, stream_);
      } else {
        device_.sum_blocks(dtype, f.comm.data(), static_cast<size_t>(comm_.size()), p.numel, post_,
                           gdt, partition_at(p.begin), p.numel, true, stream_);
      }
      return;
    case Route::Shards: {
      const size_t shard_begin = shards_->shard_offset(layout_.layer_first(f.entries.back().layer));
      const uint8_t* mine = f.comm.data() + static_cast<size_t>(rank) * p.numel * esize();
      device_.sum_blocks(dtype, mine, 1, 0, post_, gdt, at(partition_, shard_begin), p.numel, true,
                         stream_);
      return;
    }
    case Route::Allreduce:
      break;
  }
  // Allreduce: every rank holds the whole reduced bucket.
  if (mode_ == Mode::InPlace) {
    void* g = f.entries.back().grad;
    if (!f.in_place) device_.cast(dtype, f.comm.data(), gdt, g, p.numel, stream_);
    if (post_ != 1.0f) device_.scale(gdt, g, post_, p.numel, stream_);
  } else if (mode_ == Mode::ToPartition) {
    const Range mine = run_of(rank, p.begin, p.end);
    if (mine.size() == 0) return;
    device_.sum_blocks(dtype, f.comm.data() + (mine.begin - p.begin) * esize(), 1, 0, post_, gdt,
                       partition_at(mine.begin), mine.size(), true, stream_);
  } else {
    // Stage 3 keeps, of every parameter in the bucket, the shard this rank stores.
    const size_t first = layout_.layer_first(f.entries.back().layer);
    const size_t last = layout_.layer_last(f.entries.front().layer);
    for (size_t q = first; q < last; ++q) {
      const size_t real = shards_->real_in_shard(q, rank);
      if (real == 0) continue;
      const size_t from =
          layout_.offset_at(q) - p.begin + shards_->shard_numel(q) * static_cast<size_t>(rank);
      device_.sum_blocks(dtype, f.comm.data() + from * esize(), 1, 0, post_, gdt,
                         at(partition_, shards_->shard_offset(q)), real, true, stream_);
    }
  }
}

// The host stood waiting for reductions since `from`: exposed communication, and a "wait" span
// on the waiting thread's track (a trace's compute is its steps less their waits).
void GradReducer::waited(Clock::time_point from) {
  const auto now = Clock::now();
  timing_.exposed_seconds += seconds(now - from);
  if (trace::recording()) trace::span("wait for gradient reductions", "wait", from, now);
}

// The communication stream runs the buckets one after another, so their busy times add up
// without overlaps to merge.
void GradReducer::settle() {
  for (const InFlight& f : launched_) {
    if (trace::recording()) trace_bucket(f);
    BucketEvents& e = bucket_events_[f.events];
    timing_.busy_seconds += std::max(0.0, device_.seconds_between(*e.begun, *e.finished));
  }
  launched_.clear();
}

// The bucket on the "gradient reductions" track, from when the stream began it to when its
// collective finished.
void GradReducer::trace_bucket(const InFlight& f) const {
  if (!f.started || !f.finished) return;  // launched before the trace began
  static const char* const kCollective[] = {"allreduce", "reduce-scatter (owner runs)", "reduce to owner",
                                            "reduce-scatter (shards)"};
  const Plan& p = *f.plan;
  trace::span(trace::track("gradient reductions"), std::string("bucket ") + kCollective[static_cast<int>(p.route)],
              "comm", *f.started, std::max(*f.started, *f.finished),
              {{"bytes", static_cast<double>(p.numel * esize())},
               {"layers", std::to_string(f.entries.back().layer) + "-" + std::to_string(f.entries.front().layer)},
               {"queued_ms", seconds(std::max(*f.started, f.ready) - f.ready) * 1e3}});
}

// contiguous_gradients: a kept buffer that fits (zeroed when `zeroed`: padding must read as
// zero); when none fits, the largest kept one is replaced by a bigger one (the first backward
// only: at its end every kept buffer grows to the largest bucket). Otherwise a new buffer per
// bucket.
Buffer<uint8_t> GradReducer::take_buffer(size_t bytes, bool zeroed) {
  if (options_.contiguous_gradients) {
    largest_ = std::max(largest_, bytes);
    auto best = spare_.end();
    for (auto it = spare_.begin(); it != spare_.end(); ++it) {
      if (it->size() >= bytes && (best == spare_.end() || it->size() < best->size())) best = it;
    }
    if (best != spare_.end()) {
      Buffer<uint8_t> b = std::move(*best);
      spare_.erase(best);
      if (zeroed) device_.fill_zero(b.data(), bytes, stream_);
      return b;
    }
    if (!spare_.empty()) {
      spare_.erase(std::max_element(spare_.begin(), spare_.end(), [](const auto& a, const auto& b) {
        return a.size() < b.size();
      }));
    }
  }
  return ctx_.buffer<uint8_t>(MemoryKind::Buffers, bytes, stream_);
}

void GradReducer::give_back(Buffer<uint8_t>&& buffer) {
  if (buffer.empty()) return;
  if (options_.contiguous_gradients && spare_.size() < kMaxBuffers) {
    spare_.push_back(std::move(buffer));
  } else {
    buffer.reset(stream_);
  }
}

}  // namespace dsx::zero
