#include "tests/emulated_gpu/kernel_launch.h"

#include <string>
#include <utility>
#include <vector>

#include "tests/emulated_gpu/block_runner.h"
#include "tests/emulated_gpu/runtime.h"

namespace dsx::emu {
namespace {

std::string dims(dim3 d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

// The GPU's refusal of a shape (CUDA's limits for compute capability 8.0 and 9.0), or "".
std::string shape_error(const LaunchShape& s) {
  const unsigned long long threads = 1ull * s.block.x * s.block.y * s.block.z;
  if (threads == 0 || s.grid.x == 0 || s.grid.y == 0 || s.grid.z == 0)
    return "an empty grid or block";
  if (threads > 1024) return std::to_string(threads) + " threads per block (at most 1024)";
  if (s.block.x > 1024 || s.block.y > 1024 || s.block.z > 64)
    return "block " + dims(s.block) + " (at most (1024,1024,64))";
  if (s.grid.x > 0x7fffffffu || s.grid.y > 65535 || s.grid.z > 65535)
    return "grid " + dims(s.grid) + " (at most (2^31-1,65535,65535))";
  if (s.shared_bytes > 48 * 1024)
    return std::to_string(s.shared_bytes) + " bytes of dynamic shared memory (at most 48 KiB)";
  return {};
}

thread_local std::vector<Touch> t_touches;  // declared for the next launch

}  // namespace

void declare_launch_touches(std::initializer_list<Touch> touches) {
  t_touches.insert(t_touches.end(), touches.begin(), touches.end());
}

void launch_kernel(const LaunchShape& shape, std::function<void()> body) {
  std::vector<Touch> touches = std::exchange(t_touches, {});
  if (cudaError_t e = sticky_error()) {
    set_last_error(e);
    return;
  }
  if (std::string why = shape_error(shape); !why.empty()) {
    say(std::string("kernel ") + shape.kernel + " refused: " + why + ", grid " + dims(shape.grid) +
        ", block " + dims(shape.block));
    set_last_error(cudaErrorInvalidConfiguration);
    return;
  }
  const LaunchShape s = shape;
  cudaError_t e = enqueue(
      shape.stream, shape.kernel,
      [s, body = std::move(body)] { return run_grid(s.kernel, s.grid, s.block, s.shared_bytes, body); },
      touches);
  set_last_error(e);
}

}  // namespace dsx::emu
