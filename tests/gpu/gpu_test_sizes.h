// Problem sizes of the GPU tests. On the emulated GPU (DSX_CUDA_EMULATED) every GPU thread is a
// fiber on a CPU core, so the large cases shrink; each kernel still runs several grid-stride
// rounds there (2 SMs x 8 blocks x 256 threads x 4 elements = 16384 elements a round), so the
// logic the small sizes skip still runs. On a real GPU the sizes are the CPU tests'.
#pragma once

#include <cstddef>
#include <vector>

#include "tests/kernels/kernel_test_util.h"

namespace dsx::kernels::test {

inline constexpr bool kEmulatedGpu =
#ifdef DSX_CUDA_EMULATED
    true;
#else
    false;
#endif

inline const std::vector<size_t>& gpu_test_lengths() {
  static const std::vector<size_t> lengths{0, 1, 15, 16, 17, 50'003};
  return kEmulatedGpu ? lengths : test_lengths();
}

}  // namespace dsx::kernels::test
