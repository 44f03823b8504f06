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

#include "dsx/error.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/mixed_precision.h"
#include "kernels/cuda/optimizers.h"

namespace dsx::device {
namespace {

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  const ErrorKind kind =
      e == cudaErrorMemoryAllocation ? ErrorKind::OutOfMemory : ErrorKind::Internal;
  throw Error(kind, std::string(what) + " failed: " + cudaGetErrorString(e));
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
  explicit CudaEvent(int device) {
    check(cudaSetDevice(device), "cudaSetDevice");
    check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
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
  ~CudaStream() override {
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
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    cudaError_t state;
    // Polled, not cudaStreamSynchronize: that would block past any timeout.
    while ((state = cudaStreamQuery(stream_)) == cudaErrorNotReady) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw Error(ErrorKind::Timeout,
                    "waited " + std::to_string(timeout.count() / 1000) + " s for CUDA stream '" +
                        name_ + "'; a collective on it may wait for a dead or slow peer");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    check(state, ("CUDA stream '" + name_ + "'").c_str());
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
  std::unique_ptr<Event> create_event() override { return std::make_unique<CudaEvent>(ordinal_); }

  void synchronize(Event& event, std::chrono::milliseconds timeout, const char* what) override {
    auto& e = static_cast<CudaEvent&>(event);
    if (!e.recorded) return;
    select();
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    cudaError_t state;
    while ((state = cudaEventQuery(e.event)) == cudaErrorNotReady) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw Error(ErrorKind::Timeout,
                    "waited " + std::to_string(timeout.count() / 1000) + " s for " + what);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    check(state, what);
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

  void* allocate_pinned(size_t bytes) override {
    select();
    void* data = nullptr;
    check(cudaMallocHost(&data, bytes), "cudaMallocHost");
    return data;
  }
  void free_pinned(void* data) override {
    if (data) cudaFreeHost(data);
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

  void adam_step(const kernels::AdamHyper& h, int64_t step, float grad_factor, float* param,
                 const float* grad, float* m, float* v, size_t count, kernels::ParamCopy copy,
                 Stream& s) override {
    select();
    kernels::cuda::adam_step(h, step, grad_factor, param, grad, m, v, count, copy,
                             cuda_of(s).get());
  }
  void lion_step(const kernels::LionHyper& h, float grad_factor, float* param, const float* grad,
                 float* m, size_t count, kernels::ParamCopy copy, Stream& s) override {
    select();
    kernels::cuda::lion_step(h, grad_factor, param, grad, m, count, copy, cuda_of(s).get());
  }
  void sgd_step(const kernels::SgdHyper& h, int64_t step, float grad_factor, float* param,
                const float* grad, float* momentum, size_t count, kernels::ParamCopy copy,
                Stream& s) override {
    select();
    kernels::cuda::sgd_step(h, step, grad_factor, param, grad, momentum, count, copy,
                            cuda_of(s).get());
  }
  void adagrad_step(const kernels::AdagradHyper& h, float grad_factor, float* param,
                    const float* grad, float* sum_sq, size_t count, kernels::ParamCopy copy,
                    Stream& s) override {
    select();
    kernels::cuda::adagrad_step(h, grad_factor, param, grad, sum_sq, count, copy, cuda_of(s).get());
  }
  void lamb_prepare(const kernels::LambHyper& h, int64_t step, float grad_factor,
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
  return std::make_unique<CudaDevice>(kernels::cuda::use_rank_device());
}

}  // namespace dsx::device
