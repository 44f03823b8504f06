// The cuda device: thin calls onto CUDA streams and events, stream-ordered allocation
// (cudaMallocAsync) and the kernels of kernels/cuda. Everything above it is tested on the cpu
// device; what is here is only the mapping. Every call selects the device first, so a thread that
// never touched CUDA (a communicator's worker, a stream's host task) works on the right GPU.
#include "device/cuda_device.h"

#include <cuda_runtime_api.h>

#include <array>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "device/cuda_error.h"
#include "dsx/error.h"
#include "kernels/cuda/mixed_precision.h"
#include "kernels/cuda/optimizers.h"

namespace dsx::device {
namespace {

void check(cudaError_t e, const std::string& what) { check_cuda(e, what); }

// Polls until `done` says the GPU got there: cudaStreamSynchronize and cudaEventSynchronize
// would block past any timeout. Error(Timeout) names `what`.
template <class Query>
void poll_until(Query done, std::chrono::milliseconds timeout, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  cudaError_t state;
  while ((state = done()) == cudaErrorNotReady) {
    if (std::chrono::steady_clock::now() > deadline) {
      throw Error(ErrorKind::Timeout, "waited " + std::to_string(timeout.count() / 1000) + " s for " +
                                          what + "; a collective on it may wait for a dead or slow peer");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  check(state, what);
}

// A stream-ordered allocation that is given back on the stream unless released, so that an
// error between allocating and handing it over leaks nothing.
class StreamAllocation {
 public:
  StreamAllocation(size_t bytes, cudaStream_t stream) : stream_(stream) {
    check(cudaMallocAsync(&data_, bytes, stream), "cudaMallocAsync");
  }
  ~StreamAllocation() {
    if (data_) cudaFreeAsync(data_, stream_);
  }
  StreamAllocation(const StreamAllocation&) = delete;
  StreamAllocation& operator=(const StreamAllocation&) = delete;
  void* get() const { return data_; }
  void* release() { return std::exchange(data_, nullptr); }

 private:
  void* data_ = nullptr;
  cudaStream_t stream_;
};

class CudaEvent final : public Event {
 public:
  CudaEvent(int device, bool timed) {
    check(cudaSetDevice(device), "cudaSetDevice");
    check(cudaEventCreateWithFlags(&event, timed ? cudaEventDefault : cudaEventDisableTiming),
          "cudaEventCreate");
  }
  ~CudaEvent() override { cudaEventDestroy(event); }
  cudaEvent_t event = nullptr;
  bool recorded = false;
};

class CudaStream final : public Stream {
 public:
  CudaStream(std::string name, int device) : name_(std::move(name)), device_(device) {
    check(cudaSetDevice(device_), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  // A stream someone else owns: neither drained nor destroyed here.
  CudaStream(std::string name, int device, cudaStream_t adopted)
      : name_(std::move(name)), device_(device), stream_(adopted), owned_(false) {}
  ~CudaStream() override {
    if (!owned_) return;
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  const std::string& name() const override { return name_; }
  void record(Event& event) override {
    auto& e = static_cast<CudaEvent&>(event);
    check(cudaSetDevice(device_), "cudaSetDevice");
    check(cudaEventRecord(e.event, stream_), "cudaEventRecord");
    e.recorded = true;
  }
  void wait(Event& event) override {
    auto& e = static_cast<CudaEvent&>(event);
    if (!e.recorded) return;
    check(cudaSetDevice(device_), "cudaSetDevice");
    check(cudaStreamWaitEvent(stream_, e.event, 0), "cudaStreamWaitEvent");
  }
  void synchronize(std::chrono::milliseconds timeout) override {
    check(cudaSetDevice(device_), "cudaSetDevice");
    poll_until([this] { return cudaStreamQuery(stream_); }, timeout, "CUDA stream '" + name_ + "'");
    std::lock_guard lock(mutex_);
    if (host_error_) throw *host_error_;
  }
  void* native() const override { return stream_; }
  cudaStream_t get() const { return stream_; }
  void host_failed(const Error& e) {
    std::lock_guard lock(mutex_);
    if (!host_error_) host_error_ = e;
  }

 private:
  std::string name_;
  int device_;
  cudaStream_t stream_ = nullptr;
  bool owned_ = true;
  std::mutex mutex_;
  std::optional<Error> host_error_;
};

CudaStream& cuda_of(Stream& s) { return static_cast<CudaStream&>(s); }

struct HostTask {
  std::function<void()> fn;
  CudaStream* stream;
};

void CUDART_CB run_host_task(void* data) {
  std::unique_ptr<HostTask> task(static_cast<HostTask*>(data));
  try {
    task->fn();
  } catch (const Error& e) {
    task->stream->host_failed(e);
  } catch (const std::exception& e) {
    task->stream->host_failed(
        Error(ErrorKind::Internal, std::string("host task failed: ") + e.what()));
  }
}

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int ordinal) : ordinal_(ordinal) {
    check(cudaSetDevice(ordinal_), "cudaSetDevice");
    compute_ = std::make_unique<CudaStream>("compute", ordinal_);
    keep_pool_memory();
  }
  ~CudaDevice() override {
    cudaSetDevice(ordinal_);
    for (auto& [count, offsets] : lamb_offsets_) cudaFree(offsets);
  }

  std::string name() const override { return "cuda:" + std::to_string(ordinal_); }
  bool host_accessible() const override { return false; }
  Stream& compute_stream() override { return *compute_; }
  std::unique_ptr<Stream> create_stream(const std::string& name) override {
    return std::make_unique<CudaStream>(name, ordinal_);
  }
  std::unique_ptr<Event> create_event() override {
    return std::make_unique<CudaEvent>(ordinal_, false);
  }
  std::unique_ptr<Event> create_timed_event() override {
    return std::make_unique<CudaEvent>(ordinal_, true);
  }
  double seconds_between(Event& from, Event& to) override {
    auto& a = static_cast<CudaEvent&>(from);
    auto& b = static_cast<CudaEvent&>(to);
    if (!a.recorded || !b.recorded) return 0.0;
    select();
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a.event, b.event), "cudaEventElapsedTime");
    return ms / 1e3;
  }

  void synchronize(Event& event, std::chrono::milliseconds timeout, const char* what) override {
    auto& e = static_cast<CudaEvent&>(event);
    if (!e.recorded) return;
    select();
    poll_until([&e] { return cudaEventQuery(e.event); }, timeout, what);
  }

  void* allocate(size_t bytes, Placement, Stream& stream) override {
    if (bytes == 0) return nullptr;
    select();
    StreamAllocation p(bytes, cuda_of(stream).get());
    check(cudaMemsetAsync(p.get(), 0, bytes, cuda_of(stream).get()), "cudaMemsetAsync");
    return p.release();
  }
  void free(void* data, size_t, Stream& stream) override {
    if (!data) return;
    select();
    check(cudaFreeAsync(data, cuda_of(stream).get()), "cudaFreeAsync");
  }

  void* allocate_scratch(size_t bytes, Stream& stream) override {
    if (bytes == 0) return nullptr;
    select();
    return StreamAllocation(bytes, cuda_of(stream).get()).release();
  }

  void* allocate_now(size_t bytes) override {
    if (bytes == 0) return nullptr;
    select();
    void* p = nullptr;
    check(cudaMalloc(&p, bytes), "cudaMalloc of " + std::to_string(bytes) + " bytes");
    try {
      // cudaMemset may return before it ran: zero and wait, so every stream that the host
      // orders after this call sees zeros.
      on_legacy_stream([&](cudaStream_t s) { return cudaMemsetAsync(p, 0, bytes, s); }, "cudaMemsetAsync");
    } catch (...) {
      cudaFree(p);
      throw;
    }
    return p;
  }
  void free_now(void* data) override {
    if (!data) return;
    select();
    check(cudaFree(data), "cudaFree");
  }
  void* allocate_pinned(size_t bytes) override {
    select();
    void* p = nullptr;
    check(cudaMallocHost(&p, bytes ? bytes : 1), "cudaMallocHost of " + std::to_string(bytes) + " bytes");
    return p;
  }
  void free_pinned(void* data) override {
    if (!data) return;
    select();
    check(cudaFreeHost(data), "cudaFreeHost");
  }

  void copy_now(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    select();
    on_legacy_stream([&](cudaStream_t s) { return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s); },
                   "cudaMemcpyAsync");
  }

  bool is_device_pointer(const void* data) const override {
    return device::is_device_pointer(data);  // our GPU is the process's chosen one
  }
  void make_current() override { select(); }

  bool query(Event& event) override {
    auto& e = static_cast<CudaEvent&>(event);
    if (!e.recorded) return true;
    select();
    const cudaError_t state = cudaEventQuery(e.event);
    if (state == cudaErrorNotReady) return false;
    check(state, "cudaEventQuery");
    return true;
  }
  std::unique_ptr<Stream> adopt_stream(void* native, const std::string& name) override {
    if (!native) throw Error(ErrorKind::Internal, "adopt_stream('" + name + "'): no stream given");
    return std::make_unique<CudaStream>(name, ordinal_, static_cast<cudaStream_t>(native));
  }

  void fill_bytes(void* dst, unsigned char value, size_t bytes, Stream& s) override {
    select();
    check(cudaMemsetAsync(dst, value, bytes, cuda_of(s).get()), "cudaMemsetAsync");
  }

  void copy(void* dst, const void* src, size_t bytes, Stream& s) override {
    select();
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cuda_of(s).get()), "cudaMemcpyAsync");
  }
  void fill_zero(void* dst, size_t bytes, Stream& s) override {
    select();
    check(cudaMemsetAsync(dst, 0, bytes, cuda_of(s).get()), "cudaMemsetAsync");
  }
  void scale(DType dtype, void* x, float factor, size_t count, Stream& s) override {
    select();
    kernels::cuda::scale(dtype, x, factor, count, cuda_of(s).get());
  }
  void cast(DType src_dtype, const void* src, DType dst_dtype, void* dst, size_t count,
            Stream& s) override {
    select();
    kernels::cuda::cast(src_dtype, src, dst_dtype, dst, count, cuda_of(s).get());
  }
  void sum_blocks(DType src_dtype, const void* src, size_t blocks, size_t stride, float factor,
                  DType dst_dtype, void* dst, size_t count, bool accumulate, Stream& s) override {
    select();
    kernels::cuda::sum_blocks(src_dtype, src, blocks, stride, factor, dst_dtype, dst, count,
                              accumulate, cuda_of(s).get());
  }
  void sum_of_squares(DType dtype, const void* x, size_t count, double* out, Stream& s) override {
    select();
    cudaStream_t stream = cuda_of(s).get();
    StreamAllocation workspace(kernels::cuda::sum_of_squares_workspace_bytes(), stream);
    kernels::cuda::sum_of_squares(dtype, x, count, out, workspace.get(), stream);
  }
  void narrow_to_float(const double* src, float* dst, size_t count, Stream& s) override {
    select();
    kernels::cuda::narrow_to_float(src, dst, count, cuda_of(s).get());
  }

  void zero_grad_factor(kernels::DeviceSumOfSquares sum_sq, double loss_scale, double max_norm,
                        float* factor, Stream& s) override {
    select();
    kernels::cuda::zero_grad_factor(sum_sq, loss_scale, max_norm, factor, cuda_of(s).get());
  }

  void adam_step(const kernels::AdamHyper& h, int64_t step, kernels::GradFactor grad_factor,
                 float* param, const float* grad, float* m, float* v, size_t count,
                 kernels::ParamCopy copy, Stream& s) override {
    select();
    kernels::cuda::adam_step(h, step, grad_factor, param, grad, m, v, count, copy,
                             cuda_of(s).get());
  }
  void lion_step(const kernels::LionHyper& h, kernels::GradFactor grad_factor, float* param,
                 const float* grad, float* m, size_t count, kernels::ParamCopy copy,
                 Stream& s) override {
    select();
    kernels::cuda::lion_step(h, grad_factor, param, grad, m, count, copy, cuda_of(s).get());
  }
  void sgd_step(const kernels::SgdHyper& h, int64_t step, kernels::GradFactor grad_factor,
                float* param, const float* grad, float* momentum, size_t count,
                kernels::ParamCopy copy, Stream& s) override {
    select();
    kernels::cuda::sgd_step(h, step, grad_factor, param, grad, momentum, count, copy,
                            cuda_of(s).get());
  }
  void adagrad_step(const kernels::AdagradHyper& h, kernels::GradFactor grad_factor, float* param,
                    const float* grad, float* sum_sq, size_t count, kernels::ParamCopy copy,
                    Stream& s) override {
    select();
    kernels::cuda::adagrad_step(h, grad_factor, param, grad, sum_sq, count, copy, cuda_of(s).get());
  }
  void lamb_prepare(const kernels::LambHyper& h, int64_t step, kernels::GradFactor grad_factor,
                    const float* param, const float* grad, float* m, float* v, size_t count,
                    double* norms_sq, Stream& s) override {
    select();
    cudaStream_t stream = cuda_of(s).get();
    const kernels::cuda::LambLayout layout = lamb_layout(count);
    StreamAllocation workspace(kernels::cuda::lamb_workspace_bytes(layout), stream);
    kernels::cuda::lamb_prepare(h, step, grad_factor, param, grad, m, v, layout, norms_sq,
                                workspace.get(), stream);
  }
  void lamb_apply(const kernels::LambHyper& h, int64_t step, float* param, const float* m,
                  const float* v, size_t count, const double* norms_sq, kernels::ParamCopy copy,
                  Stream& s) override {
    select();
    kernels::cuda::lamb_apply(h, step, param, m, v, lamb_layout(count), norms_sq, nullptr, copy,
                              cuda_of(s).get());
  }

  void host_task(Stream& s, std::function<void()> fn, std::span<const Touch>,
                 const char*) override {
    select();
    auto task = std::make_unique<HostTask>(HostTask{std::move(fn), &cuda_of(s)});
    check(cudaLaunchHostFunc(cuda_of(s).get(), run_host_task, task.get()), "cudaLaunchHostFunc");
    task.release();  // run_host_task owns it now
  }

 private:
  void select() const { check(cudaSetDevice(ordinal_), "cudaSetDevice"); }

  // Enqueues `call` on the legacy default stream and polls it: ordered as cudaMemcpy is (after
  // the work of every blocking stream, such as a user's cudaStreamCreate'd one), but with a
  // timeout, which cudaMemcpy lacks.
  template <class Call>
  void on_legacy_stream(Call call, const char* what) {
    check(call(cudaStreamLegacy), what);
    poll_until([] { return cudaStreamQuery(cudaStreamLegacy); }, kHostWait, what);
  }

  // The stream-ordered pool keeps what is freed instead of returning it to the driver at each
  // synchronisation, so a step's buffers are reused, not allocated again, every step.
  void keep_pool_memory() const {
    cudaMemPool_t pool = nullptr;
    check(cudaDeviceGetDefaultMemPool(&pool, ordinal_), "cudaDeviceGetDefaultMemPool");
    uint64_t keep_all = UINT64_MAX;
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all),
          "cudaMemPoolSetAttribute (release threshold)");
  }

  // LAMB over one run: the tensor table {0, count}, in device memory, made once per count.
  kernels::cuda::LambLayout lamb_layout(size_t count) {
    std::lock_guard lock(mutex_);
    auto [it, fresh] = lamb_offsets_.try_emplace(count, nullptr);
    auto& host = lamb_host_[count];
    host = {0, count};
    if (fresh) {
      // Uploaded on the compute stream and waited for once: the table is then read from any
      // stream. (A cudaMemcpy on the legacy stream would not order the non-blocking streams.)
      void* table = nullptr;
      cudaError_t e = cudaMalloc(&table, 2 * sizeof(size_t));
      if (e == cudaSuccess) {
        cudaStream_t stream = compute_->get();
        e = cudaMemcpyAsync(table, host.data(), 2 * sizeof(size_t), cudaMemcpyHostToDevice, stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
        if (e != cudaSuccess) cudaFree(table);
      }
      if (e != cudaSuccess) lamb_offsets_.erase(it);
      check(e, "the LAMB tensor table (cudaMalloc, cudaMemcpyAsync)");
      it->second = static_cast<size_t*>(table);
    }
    return {it->second, host.data(), 1};
  }

  // How long copy_now and allocate_now wait for the GPU.
  static constexpr std::chrono::minutes kHostWait{5};

  int ordinal_;
  std::unique_ptr<CudaStream> compute_;
  std::mutex mutex_;
  std::map<size_t, size_t*> lamb_offsets_;
  std::map<size_t, std::array<size_t, 2>> lamb_host_;
};

}  // namespace

std::unique_ptr<Device> make_cuda_device() {
  // The process's one GPU, so that every other user of CUDA in it (the ofi backend staging device
  // memory, the nccl backend, the model) works on the same device.
  return std::make_unique<CudaDevice>(use_rank_device());
}

}  // namespace dsx::device
