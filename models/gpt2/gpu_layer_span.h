// A span of the kernels one layer enqueued on a CUDA stream, stamped by the stream itself: host
// functions (cudaLaunchHostFunc) in stream order record when the stream reaches the layer's first
// and last kernel, so the span shows when the GPU ran the layer, not when the host launched it.
// It lands on the track "cuda:<device> model" beside the host's own layer spans. While no trace
// is recorded it enqueues nothing. CUDA builds only (included by gpt2_cuda.cpp).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "trace/trace.h"

namespace dsx::models {

class GpuLayerSpan {
 public:
  GpuLayerSpan(cudaStream_t stream, const char* what, int layer) : stream_(stream) {
    if (!trace::recording()) return;
    int device = 0;
    cudaGetDevice(&device);
    open_ = new Open{std::string(what) + " " + std::to_string(layer),
                     trace::track("cuda:" + std::to_string(device) + " model"), {}};
    if (cudaLaunchHostFunc(stream_, &begin, open_) != cudaSuccess) {
      delete open_;
      open_ = nullptr;
    }
  }
  ~GpuLayerSpan() {
    // The end task owns the record from here; if it cannot be enqueued the span is dropped (the
    // stream's failure surfaces where its work is waited for).
    if (open_ && cudaLaunchHostFunc(stream_, &end, open_) != cudaSuccess) delete open_;
  }
  GpuLayerSpan(const GpuLayerSpan&) = delete;
  GpuLayerSpan& operator=(const GpuLayerSpan&) = delete;

 private:
  struct Open {
    std::string name;
    int track;
    trace::Clock::time_point begin;
  };
  static void begin(void* p) { static_cast<Open*>(p)->begin = trace::Clock::now(); }
  static void end(void* p) {
    Open* open = static_cast<Open*>(p);
    trace::span(open->track, std::move(open->name), "gpu layer", open->begin, trace::Clock::now());
    delete open;
  }

  cudaStream_t stream_;
  Open* open_ = nullptr;
};

}  // namespace dsx::models
