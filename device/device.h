// The device layer: memory, streams, events, copies and the fused element kernels of one device,
// behind one interface with two implementations: `cpu` (host memory; each stream a worker thread
// that runs its queue in order; a stream-order checker for tests) and `cuda` (stream-ordered
// allocation, CUDA streams and events, the kernels of kernels/cuda). ZeRO is written once
// against it and never learns which device it runs on.
//
// The rules are CUDA's. Work enqueued on one stream runs in order; work on two streams is
// unordered unless one waits for an event the other recorded. The host orders itself after a
// stream with synchronize(). Every call that enqueues returns at once; every wait has a timeout.
// Pointers are device memory; on a device that is host_accessible() the host may also read and
// write them directly, after ordering itself (and telling the checker through host_access()).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "kernels/clip_math.h"
#include "kernels/dtype.h"
#include "kernels/optimizer_math.h"
#include "kernels/optimizers.h"

namespace dsx::device {

using kernels::DType;

enum class Access : uint8_t { Read, Write };

// A byte range an operation reads or writes: what the stream-order checker tracks.
struct Touch {
  const void* data = nullptr;
  size_t bytes = 0;
  Access access = Access::Read;
};

// What a buffer is for. The cpu device takes buffers that collectives read from memory the ranks
// of a host share (comm/host_memory.h), so they reduce them in place; others are private.
enum class Placement : uint8_t { Private, Communicated };

// A point in a stream's work: recorded on one stream, waited for by another stream or the host.
class Event {
 public:
  virtual ~Event() = default;
};

class Stream {
 public:
  virtual ~Stream() = default;
  virtual const std::string& name() const = 0;
  // Marks the point after everything enqueued so far (re-recording moves the mark).
  virtual void record(Event& event) = 0;
  // Work enqueued later on this stream starts after the point `event` marks now (no-op when the
  // event was never recorded).
  virtual void wait(Event& event) = 0;
  // The host waits until the stream ran everything enqueued so far. Rethrows the first failure of
  // the stream's work; Error(Timeout), naming the stream, when `timeout` passes first.
  virtual void synchronize(std::chrono::milliseconds timeout) = 0;
  // The backend's handle (cudaStream_t on cuda; null on cpu).
  virtual void* native() const { return nullptr; }
};

class Device {
 public:
  virtual ~Device() = default;

  virtual std::string name() const = 0;      // "cpu", "cuda:0"
  virtual bool host_accessible() const = 0;  // device pointers are host memory too
  // The stream the model computes on. On the cpu device it is the calling thread itself: work
  // enqueued there runs at once, and waiting for an event there blocks the caller.
  virtual Stream& compute_stream() = 0;
  virtual std::unique_ptr<Stream> create_stream(const std::string& name) = 0;
  virtual std::unique_ptr<Event> create_event() = 0;
  // An event that also keeps when its stream reached it, for seconds_between (cuda: timing on,
  // which makes it a little dearer to record and wait for than create_event's).
  virtual std::unique_ptr<Event> create_timed_event() = 0;
  // Seconds from the point timed event `from` marks to the point `to` marks; both reached (the
  // host has synchronised past them).
  virtual double seconds_between(Event& from, Event& to) = 0;
  // The host waits for the point `event` marks (Error(Timeout) naming `what` past `timeout`).
  virtual void synchronize(Event& event, std::chrono::milliseconds timeout, const char* what) = 0;

  // ---- memory (stream-ordered, as cudaMallocAsync/cudaFreeAsync) ----
  // `bytes` zero-filled bytes, usable by `stream` at once and by other streams after they wait
  // for an event recorded on `stream` after this call. Error(OutOfMemory) when there is no room.
  virtual void* allocate(size_t bytes, Placement placement, Stream& stream) = 0;
  // Returned once `stream` has run the work enqueued before; work on other streams that used
  // the memory must be ordered before this point.
  virtual void free(void* data, size_t bytes, Stream& stream) = 0;

  // `bytes` of device memory, not initialised, on `stream` as allocate(): for scratch the stream
  // overwrites before reading (staging, workspaces).
  virtual void* allocate_scratch(size_t bytes, Stream& stream) = 0;

  // ---- memory outside stream order (set-up, buffers that live as long as their owner) ----
  // `bytes` zero-filled bytes, usable by every stream once this returns (cudaMalloc).
  // Error(OutOfMemory) when there is no room.
  virtual void* allocate_now(size_t bytes) = 0;
  // Frees memory of allocate_now; the caller has ordered every stream that used it before.
  virtual void free_now(void* data) = 0;
  // Page-locked host memory (cudaMallocHost): copies between it and the device run
  // asynchronously. Plain host memory on a host_accessible device.
  virtual void* allocate_pinned(size_t bytes) = 0;
  virtual void free_pinned(void* data) = 0;
  // Copies between any two of host, pinned and device memory and returns when done. Ordered as
  // cudaMemcpy: after the work of blocking streams (the legacy default stream), not after the
  // device's own streams (the caller orders itself after those first). The wait times out.
  virtual void copy_now(void* dst, const void* src, size_t bytes) = 0;
  // Whether `data` is memory the host cannot read directly (cuda: device or managed memory of
  // any GPU; cpu: never).
  virtual bool is_device_pointer(const void* data) const = 0;
  // Makes this device the calling thread's current one (CUDA keeps it per thread); cpu: no-op.
  virtual void make_current() = 0;

  // ---- events and streams beyond record/wait ----
  // Whether the stream reached the point `event` marks (true when never recorded); never blocks.
  // Rethrows the failure of the stream's work that the event follows.
  virtual bool query(Event& event) = 0;
  // A Stream over a backend stream that someone else owns (a model's cudaStream_t): not
  // destroyed or drained with the wrapper; `native` is not null. On cpu (no native streams) it
  // is a new worker stream.
  virtual std::unique_ptr<Stream> adopt_stream(void* native, const std::string& name) = 0;

  // ---- work on a stream ----
  virtual void copy(void* dst, const void* src, size_t bytes, Stream& stream) = 0;
  virtual void fill_zero(void* dst, size_t bytes, Stream& stream) = 0;
  // dst[i] = value for `bytes` bytes (cudaMemsetAsync).
  virtual void fill_bytes(void* dst, unsigned char value, size_t bytes, Stream& stream) = 0;
  // x[i] *= factor.
  virtual void scale(DType dtype, void* x, float factor, size_t count, Stream& stream) = 0;
  virtual void cast(DType src_dtype, const void* src, DType dst_dtype, void* dst, size_t count,
                    Stream& stream) = 0;
  // kernels/reduce.h's sum_blocks: dst [+]= factor * the sum of `blocks` blocks of src.
  virtual void sum_blocks(DType src_dtype, const void* src, size_t blocks, size_t stride,
                          float factor, DType dst_dtype, void* dst, size_t count, bool accumulate,
                          Stream& stream) = 0;
  // *out (device double) = sum of x[i]^2, accumulated in float64.
  virtual void sum_of_squares(DType dtype, const void* x, size_t count, double* out,
                              Stream& stream) = 0;
  // dst[i] (device float) = src[i] rounded to fp32: a double sum made ready for an fp32
  // collective without a trip through the host.
  virtual void narrow_to_float(const double* src, float* dst, size_t count, Stream& stream) = 0;
  // *factor (device float) = kernels/clip_math.h's zero_grad_factor of the global sum of squares
  // (device memory): the unscale and clip factor the optimizer reads there (GradFactor::device).
  virtual void zero_grad_factor(kernels::DeviceSumOfSquares sum_sq, double loss_scale,
                                double max_norm, float* factor, Stream& stream) = 0;

  // The fused optimizers (kernels/optimizers.h, same arguments) on device memory; `copy` also
  // writes the updated parameters in a 16-bit working precision. `grad_factor` may name a device
  // float (kernels/optimizer_math.h's GradFactor), read in stream order.
  virtual void adam_step(const kernels::AdamHyper& h, int64_t step, kernels::GradFactor grad_factor,
                         float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                         size_t count, kernels::ParamCopy copy, Stream& stream) = 0;
  virtual void lion_step(const kernels::LionHyper& h, kernels::GradFactor grad_factor, float* param,
                         const float* grad, float* exp_avg, size_t count, kernels::ParamCopy copy,
                         Stream& stream) = 0;
  virtual void sgd_step(const kernels::SgdHyper& h, int64_t step, kernels::GradFactor grad_factor,
                        float* param, const float* grad, float* momentum_buffer, size_t count,
                        kernels::ParamCopy copy, Stream& stream) = 0;
  virtual void adagrad_step(const kernels::AdagradHyper& h, kernels::GradFactor grad_factor,
                            float* param, const float* grad, float* sum_sq, size_t count,
                            kernels::ParamCopy copy, Stream& stream) = 0;
  // LAMB over one tensor's run of `count` elements: norms_sq (device, 2 doubles) gets sum(p^2),
  // sum(u^2); lamb_apply reads the (globally summed) pair.
  virtual void lamb_prepare(const kernels::LambHyper& h, int64_t step,
                            kernels::GradFactor grad_factor, const float* param, const float* grad,
                            float* exp_avg, float* exp_avg_sq, size_t count, double* norms_sq,
                            Stream& stream) = 0;
  virtual void lamb_apply(const kernels::LambHyper& h, int64_t step, float* param,
                          const float* exp_avg, const float* exp_avg_sq, size_t count,
                          const double* norms_sq, kernels::ParamCopy copy, Stream& stream) = 0;

  // Runs `fn` on a host thread when `stream` reaches this point; the stream's later work waits
  // for it. For work the host does in stream order: collectives of host backends, bookkeeping.
  // `touches` are the device ranges fn reads and writes (for the checker); `what` names it. fn
  // must not enqueue device work. A throw fails the stream (rethrown by synchronize).
  virtual void host_task(Stream& stream, std::function<void()> fn, std::span<const Touch> touches,
                         const char* what) = 0;

  // The host reads or writes these device ranges now (host_accessible devices): the checker
  // verifies that the host is ordered after the streams that wrote (or read) them.
  virtual void host_access(std::span<const Touch> touches, const char* what) {
    (void)touches;
    (void)what;
  }
  // Work enqueued on `stream` by someone else (a model's kernels on the compute stream) touches
  // these ranges: the checker treats it as that stream's work.
  virtual void declare(Stream& stream, std::span<const Touch> touches, const char* what) {
    (void)stream;
    (void)touches;
    (void)what;
  }
};

// The bytes of `count` elements of `dtype`.
inline size_t bytes_of(DType dtype, size_t count) { return count * kernels::dtype_size(dtype); }

}  // namespace dsx::device
