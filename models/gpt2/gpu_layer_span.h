// A span of the kernels one layer enqueued on a GPU stream, stamped by the stream itself: host
// tasks in stream order (Device::host_task) record when the stream reaches the layer's first and
// last kernel, so the span shows when the GPU ran the layer, not when the host launched it. It
// lands on the track "<device> model" (e.g. "cuda:0 model") beside the host's own layer spans.
// While no trace is recorded it enqueues nothing. CUDA builds only.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "device/device.h"
#include "dsx/error.h"
#include "trace/trace.h"

namespace dsx::models {

class GpuLayerSpan {
 public:
  GpuLayerSpan(device::Device& gpu, device::Stream& stream, const char* what, int layer) {
    if (!trace::recording()) return;
    enqueue_ = [&gpu, &stream](std::function<void()> fn) {
      try {
        gpu.host_task(stream, std::move(fn), {}, "trace a layer's span");
        return true;
      } catch (const Error&) {
        return false;  // the stream's failure surfaces where its work is waited for
      }
    };
    open(gpu.name(), what, layer);
  }
  ~GpuLayerSpan() {
    if (!span_) return;
    // If the end cannot be enqueued the span is dropped.
    enqueue_([span = span_] {
      trace::span(span->track, std::move(span->name), "gpu layer", span->begin, trace::Clock::now());
    });
  }
  GpuLayerSpan(const GpuLayerSpan&) = delete;
  GpuLayerSpan& operator=(const GpuLayerSpan&) = delete;

 private:
  struct Open {
    std::string name;
    int track;
    trace::Clock::time_point begin;
  };
  void open(const std::string& device, const char* what, int layer) {
    auto span = std::make_shared<Open>(Open{std::string(what) + " " + std::to_string(layer),
                                            trace::track(device + " model"), {}});
    if (enqueue_([span] { span->begin = trace::Clock::now(); })) span_ = std::move(span);
  }

  std::function<bool(std::function<void()>)> enqueue_;
  std::shared_ptr<Open> span_;
};

}  // namespace dsx::models
