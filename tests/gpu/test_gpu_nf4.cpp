// The NF4 CUDA kernels (kernels/cuda/nf4.h) against the CPU ones (kernels/nf4_tensor.h, which
// tests/kernels/test_nf4.cpp holds to bitsandbytes): the resolved double-quantised absmax and the
// dequantised rows bit for bit, the forward product and the input gradient to float rounding
// (the GPU sums in a different order than the CPU's BLAS). Skips when no GPU is visible.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/nf4.h"
#include "kernels/nf4_tensor.h"

namespace dsx::kernels {
namespace {

bool gpu_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// A device copy of a host vector, freed on scope exit.
template <class T>
class DeviceCopy {
 public:
  explicit DeviceCopy(const std::vector<T>& host) : n_(host.size()) {
    cuda_ok(cudaMalloc(reinterpret_cast<void**>(&ptr_), bytes() ? bytes() : 1), "cudaMalloc");
    if (bytes()) cuda_ok(cudaMemcpy(ptr_, host.data(), bytes(), cudaMemcpyHostToDevice), "upload");
  }
  ~DeviceCopy() { cudaFree(ptr_); }
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
  T* get() const { return ptr_; }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    cuda_ok(cudaDeviceSynchronize(), "synchronize");
    if (bytes())
      cuda_ok(cudaMemcpy(host.data(), ptr_, bytes(), cudaMemcpyDeviceToHost), "download");
    return host;
  }

 private:
  size_t bytes() const { return n_ * sizeof(T); }
  T* ptr_ = nullptr;
  size_t n_;
};

std::vector<float> random_values(size_t n, float scale, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(gen);
  return v;
}

TEST(Nf4Cuda, MatchesTheCpuLayer) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device visible";
  const int64_t rows = 300, cols = 200, tokens = 3;  // 938 blocks: 4 nested blocks, one partial
  for (DType compute : {DType::BF16, DType::F16, DType::F32}) {
    auto w_host = random_values(size_t(rows * cols), 0.05f, 3);
    Nf4Tensor w = nf4_quantize_matrix(w_host.data(), DType::F32, rows, cols,
                                      {.blocksize = 64, .double_quant = true, .compute = compute});
    const Nf4NestedAbsmax& n = *w.nested;
    DeviceCopy<uint8_t> packed(w.packed), codes(n.codes);
    DeviceCopy<float> nested(n.absmax), code(n.code),
        absmax(std::vector<float>(size_t(w.blocks())));
    cuda::nf4_resolve_absmax(absmax.get(), codes.get(), nested.get(), code.get(), n.offset,
                             n.blocksize, w.blocks(), nullptr);
    std::vector<float> cpu_absmax(size_t(w.blocks()));
    nf4_absmax_range(cpu_absmax.data(), w, 0, w.blocks());
    EXPECT_EQ(absmax.download(), cpu_absmax);

    cuda::Nf4DeviceWeight dw{rows, cols, 64, compute, packed.get(), absmax.get()};
    const int64_t row0 = 81, nrows = 100;
    DeviceCopy<float> tile(std::vector<float>(size_t(nrows * cols)));
    cuda::nf4_dequantize_rows(tile.get(), dw, row0, nrows, nullptr);
    std::vector<float> cpu_tile(size_t(nrows * cols));
    nf4_dequantize_rows(cpu_tile.data(), w, row0, nrows);
    EXPECT_EQ(tile.download(), cpu_tile);

    auto x_host = random_values(size_t(tokens * cols), 1.0f, 5);
    auto dy_host = random_values(size_t(tokens * rows), 1.0f, 6);
    std::vector<float> dx_start(size_t(tokens * cols), 0.5f);
    DeviceCopy<float> x(x_host), dy(dy_host), y(std::vector<float>(size_t(tokens * rows))),
        dx(dx_start);
    cuda::nf4_linear_forward(y.get(), x.get(), dw, tokens, nullptr);
    cuda::nf4_linear_backward_input(dx.get(), dy.get(), dw, tokens, /*accumulate=*/true, nullptr);
    std::vector<float> cpu_y(size_t(tokens * rows)), cpu_dx = dx_start;
    nf4_linear_forward(cpu_y.data(), x_host.data(), w, tokens);
    nf4_linear_backward_input(cpu_dx.data(), dy_host.data(), w, tokens, /*accumulate=*/true);
    auto gpu_y = y.download(), gpu_dx = dx.download();
    for (size_t i = 0; i < cpu_y.size(); ++i) ASSERT_NEAR(gpu_y[i], cpu_y[i], 1e-5) << "y " << i;
    for (size_t i = 0; i < cpu_dx.size(); ++i)
      ASSERT_NEAR(gpu_dx[i], cpu_dx[i], 1e-5) << "dx " << i;
  }
}

}  // namespace
}  // namespace dsx::kernels
