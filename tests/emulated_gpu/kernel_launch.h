// DSX_LAUNCH(grid, block, shared_bytes, stream, kernel)(args...) under emulation: what
// kernel<<<grid, block, shared_bytes, stream>>>(args...) is under nvcc (kernels/cuda/launch.cuh
// defines it so). The arguments are copied at the launch, as CUDA copies them, and the kernel runs
// on the stream's worker in stream order with its real grid and block shape (block_runner.h).
// A launch the GPU would refuse (too many threads, too much shared memory, an empty or too large
// grid) fails with the GPU's error, which cudaGetLastError returns.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <initializer_list>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tests/emulated_gpu/runtime.h"

namespace dsx::emu {

struct LaunchShape {
  dim3 grid, block;
  size_t shared_bytes = 0;
  cudaStream_t stream = nullptr;
  const char* kernel = "";
};

// Checks the shape and enqueues `body` (one GPU thread's work) for every thread of the grid, with
// the ranges declared by DSX_TOUCHES before it on this thread.
void launch_kernel(const LaunchShape& shape, std::function<void()> body);

// Adds to what the next launch on this thread reads and writes (the stream-order check,
// order_check.h); that launch takes them all.
void declare_launch_touches(std::initializer_list<Touch> touches);

// `call` calls the kernel with the arguments it is given, so that a kernel template deduces its
// parameters from the arguments as at a <<<...>>> launch.
template <class Call>
class Launch {
 public:
  Launch(const LaunchShape& shape, Call call) : shape_(shape), call_(call) {}
  template <class... Args>
  void operator()(Args&&... args) const {
    launch_kernel(shape_, [call = call_, copied = std::make_tuple(std::decay_t<Args>(
                                             std::forward<Args>(args))...)] {
      std::apply(call, copied);
    });
  }

 private:
  LaunchShape shape_;
  Call call_;
};

template <class Call>
Launch<Call> make_launch(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                         const char* name, Call call) {
  return Launch<Call>({grid, block, shared_bytes, stream, name}, call);
}

}  // namespace dsx::emu

#define DSX_TOUCHES(...) ::dsx::emu::declare_launch_touches({__VA_ARGS__})
#define DSX_READS(data, bytes) ::dsx::emu::Touch{(data), (bytes), false}
#define DSX_WRITES(data, bytes) ::dsx::emu::Touch{(data), (bytes), true}
#define DSX_LAUNCH(grid, block, shared_bytes, stream, ...)                                 \
  ::dsx::emu::make_launch(grid, block, shared_bytes, stream, #__VA_ARGS__,                 \
                          [](const auto&... dsx_kernel_args) { __VA_ARGS__(dsx_kernel_args...); })
