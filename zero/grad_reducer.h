// Gradient buckets (DeepSpeed's IPG buckets): layers whose gradients are final join the open
// bucket; a bucket of reduce_bucket_size elements is reduced across the data-parallel ranks.
// With overlap_comm the reduction is launched and backward goes on (queued on the communication
// stream, where DeepSpeed's host keeps at most two in flight); without it the reduction is waited
// for at once.
//
// Where a bucket's reduced gradients go, one mode per kind of ZeRO storage:
//   InPlace       stages 0/1: the layers are a contiguous range of the full gradient buffer.
//   ToPartition   stage 2: the rank adds its part of the bucket into its gradient partition.
//   ToShards      stage 3: every parameter is cut in N shards; the rank adds its shards into
//                 its partition.
// and how they travel (ref/zero_and_kernels.md §1.5, §1.6, §1.8):
//   Allreduce     every rank gets the whole reduced bucket (stage 0; reduce_scatter false or
//                 contiguous_gradients false at stages 1/2; stage 3 with reduce_scatter false
//                 and contiguous_gradients true, as DeepSpeed's __avg_scatter_contiguous_grads).
//   OwnerRuns     stages 1/2 with reduce_scatter and contiguous_gradients, a bucket that
//                 spans several partitions: it is cut where the partitions cut it, rank r's run
//                 goes to block r (padded to the longest run) and one reduce-scatter hands each
//                 owner only its run.
//   ToOwner       the same, for a bucket inside one rank's partition: every other rank sends its
//                 copy to the owner, which adds them up (DeepSpeed's reduce to the owner).
//                 Each route is taken only when it moves fewer bytes through the busiest rank
//                 (sent + received) than an allreduce would: OwnerRuns when N·longest ≤ 2n,
//                 ToOwner for N ≤ 4 (the owner receives (N-1)·n); otherwise the bucket is
//                 allreduced.
//   Shards        stage 3 otherwise: one reduce-scatter of the bucket interleaved rank-major.
// Averaging follows DeepSpeed: gradients are multiplied by `pre` before the sum and by `post`
// after it (pre = 1/N with prescale_gradients, else 1/predivide_factor; post = predivide/N;
// stages 1/2 with reduce_scatter divide by N before the sum, as DeepSpeed's average_tensor).
//
// Each bucket's route and its layout in the communication buffer are planned the first time the
// bucket forms (the same layers form the same buckets every step) and replayed after that.
// Everything a bucket does runs on ZeRO's communication stream, after an event of the compute
// stream that says the bucket's gradients are written: packing (scale and cast), the collective,
// and unpacking (sum_blocks into the gradients or the partition). So backward never waits for a
// reduction, and with overlap_comm the host never waits for one either: a bucket's buffer serves
// the next bucket in the communication stream's order, and the end of backward is an event the
// compute stream waits for. Each bucket's collective is bracketed by two timed events on the
// communication stream (no host callback); the host reads their times (the busy time of
// timing()) only after the step's own synchronisation: settle().
//
// contiguous_gradients also decides who owns the communication buffers: true keeps them (at
// most three, each as large as the largest bucket) and reuses them bucket after bucket, as
// DeepSpeed keeps its bucket buffers, so backward allocates nothing after the first one; false
// allocates each bucket's buffer and frees it, in the stream's order, when done.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "zero/layout.h"
#include "zero/memory.h"
#include "zero/partitioning.h"
#include "zero/zero_context.h"

namespace dsx::zero {

class GradReducer {
 public:
  enum class Mode { InPlace, ToPartition, ToShards };

  // Gradients are in options.model_dtype. `partition` (ToPartition/ToShards) receives the
  // reduced gradients, added to what it holds.
  // Once a layer's gradients have been packed for communication, `copied(layer)` is called: the
  // caller may free that memory then, in the order of the communication stream.
  GradReducer(Mode mode, const ZeroLayout& layout, const Partitioning& partitioning,
              ZeroContext& context, void* partition, std::function<void(int)> copied);
  ~GradReducer();

  // The gradients of `layer` (its layer_numel elements, ZeRO order) are final on the compute
  // stream.
  void add(int layer, void* grad);
  // Reduces what is left; the compute stream's later work is ordered after every reduction.
  void flush_and_order();
  // The host has waited for the compute stream past flush_and_order(): the buckets' finishing
  // times are known now, and counted into timing().
  void settle();
  const CommTiming& timing() const { return timing_; }

 private:
  enum class Route { Allreduce, OwnerRuns, ToOwner, Shards };
  struct Entry {
    int layer;
    void* grad;
  };
  // How one bucket travels, planned once.
  struct Plan {
    Route route = Route::Allreduce;
    size_t begin = 0, end = 0;  // the bucket's range of the flat buffer (ZeRO order)
    size_t numel = 0;           // Allreduce/ToOwner: the bucket; OwnerRuns/Shards: one rank's block
    int owner = -1;             // ToOwner: the rank whose partition holds the bucket
    std::vector<Range> runs;    // OwnerRuns: every rank's run of the bucket
    size_t buffer_bytes = 0;    // the communication buffer (0: in place)
  };
  // Where the communication stream began a bucket (after its gradients) and where its
  // collective finished: reused step after step.
  struct BucketEvents {
    std::unique_ptr<device::Event> begun, finished;
  };
  struct InFlight {
    std::vector<Entry> entries;  // from the highest layer down
    const Plan* plan = nullptr;
    Buffer<uint8_t> comm;  // what the collective reads and writes (unless in place)
    void* in_place =
        nullptr;  // InPlace allreduce in the model's dtype: the range of the full buffer
    size_t events = 0;  // its BucketEvents in bucket_events_
    // Traced runs only: the host's clock when the communication stream began the bucket and
    // when its collective finished.
    std::shared_ptr<std::chrono::steady_clock::time_point> started, finished;
    std::chrono::steady_clock::time_point ready;  // when its last layer's gradients were final
  };

  void flush();
  void waited(std::chrono::steady_clock::time_point from);
  void trace_bucket(const InFlight& f) const;
  size_t take_bucket_events();
  void time_stamp(std::shared_ptr<std::chrono::steady_clock::time_point>& at);
  const Plan& plan_for(const std::vector<Entry>& entries);
  Route route_for(size_t begin, size_t end) const;
  Range run_of(int rank, size_t begin,
               size_t end) const;  // rank's part of [begin, end), stages 1/2
  void copy_as(const void* src, void* dst, size_t count);  // model dtype -> comm dtype
  // Element `offset` of a gradient buffer in the model's dtype.
  void* at(void* grad, size_t offset) const {
    return static_cast<uint8_t*>(grad) + offset * gsize();
  }
  void pack(InFlight& f);
  void pack_range(const InFlight& f, size_t lo, size_t hi, uint8_t* dst);
  void pack_shards(InFlight& f);
  void launch(InFlight& f);
  void unpack(InFlight& f);
  Buffer<uint8_t> take_buffer(size_t bytes, bool zeroed);
  void give_back(Buffer<uint8_t>&& buffer);
  size_t bucket_numel() const;
  size_t bucket_limit() const { return as_count(options_.reduce_bucket_size); }
  size_t esize() const { return kernels::dtype_size(options_.comm_dtype); }
  size_t gsize() const { return kernels::dtype_size(options_.model_dtype); }

  Mode mode_;
  const ZeroLayout& layout_;
  const FlatPartition* flat_;
  const ShardedParams* shards_;
  ZeroContext& ctx_;
  const ZeroOptions& options_;
  comm::Communicator& comm_;
  device::Device& device_;
  device::Stream& stream_;  // the communication stream
  void* partition_;
  std::function<void(int)> copied_;
  bool to_owners_ = false;  // stages 1/2 with reduce_scatter and contiguous_gradients
  float pre_ = 1.0f, post_ = 1.0f;
  std::unique_ptr<device::Event> grads_written_;
  std::unique_ptr<device::Event> reduced_;  // without overlap_comm: the bucket the host waits for
  std::vector<Entry> open_;
  std::map<std::pair<size_t, size_t>, Plan> plans_;
  std::vector<InFlight> launched_;  // enqueued, their finishing times not yet read (settle)
  std::vector<BucketEvents> bucket_events_;  // the first `launched_.size()` are in use
  std::vector<Buffer<uint8_t>> spare_;  // contiguous_gradients: buffers kept for the next buckets
  size_t largest_ = 0;                  // the largest buffer a bucket has needed (bytes)
  CommTiming timing_;
};

}  // namespace dsx::zero
