// The NF4 CUDA kernels (kernels/cuda/nf4.h) against the CPU ones (kernels/nf4_tensor.h, which
// tests/kernels/test_nf4.cpp holds to bitsandbytes): the resolved double-quantised absmax and the
// dequantised rows bit for bit, the forward product and the input gradient to float rounding
// (the GPU sums in a different order than the CPU's BLAS); over bf16/fp16 activations with a bias,
// each output within one unit in the last place of a float64 sum. Skips when no GPU is visible.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
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

// 16-bit values as the host holds them (bit patterns), and back.
uint16_t to_bits(DType t, float v) { return t == DType::F16 ? float_to_fp16(v) : float_to_bf16(v); }
float from_bits(DType t, uint16_t b) {
  return t == DType::F16 ? fp16_to_float(b) : bf16_to_float(b);
}

// The product over 16-bit activations (the CUDA Llama's bf16/fp16 storage) with a bias: each output
// is the float64 sum over the same dequantised weights and rounded inputs, rounded once to the
// 16-bit type (within one unit in its last place: 2^-8 relative for bf16, 2^-11 for fp16).
template <class T>
void check_16_bit_activations(DType storage, double ulp) {
  const int64_t rows = 70, cols = 130, tokens = 3;
  auto w_host = random_values(size_t(rows * cols), 0.05f, 7);
  Nf4Tensor w =
      nf4_quantize_matrix(w_host.data(), DType::F32, rows, cols, {.compute = DType::BF16});
  std::vector<float> absmax_host(size_t(w.blocks())), dense(size_t(rows * cols));
  nf4_absmax_range(absmax_host.data(), w, 0, w.blocks());
  nf4_dequantize_rows(dense.data(), w, 0, rows);
  DeviceCopy<uint8_t> packed(w.packed);
  DeviceCopy<float> absmax(absmax_host);
  cuda::Nf4DeviceWeight dw{rows, cols, 64, DType::BF16, packed.get(), absmax.get()};
  auto rounded = [&](std::vector<float> v) {
    std::vector<uint16_t> bits(v.size());
    for (size_t i = 0; i < v.size(); ++i) bits[i] = to_bits(storage, v[i]);
    return bits;
  };
  const auto x = rounded(random_values(size_t(tokens * cols), 1.0f, 8)),
             dy = rounded(random_values(size_t(tokens * rows), 1.0f, 9)),
             bias = rounded(random_values(size_t(rows), 0.5f, 10)),
             dx0 = rounded(std::vector<float>(size_t(tokens * cols), 0.5f));
  DeviceCopy<uint16_t> dx_d(x), dy_d(dy), bias_d(bias),
      y_d(std::vector<uint16_t>(size_t(tokens * rows))), dxo_d(dx0);
  auto as_t = [](const DeviceCopy<uint16_t>& d) { return reinterpret_cast<T*>(d.get()); };
  cuda::nf4_linear_forward(as_t(y_d), as_t(dx_d), dw, tokens, nullptr, as_t(bias_d));
  cuda::nf4_linear_backward_input(as_t(dxo_d), as_t(dy_d), dw, tokens, /*accumulate=*/true,
                                  nullptr);
  const auto y = y_d.download(), dx = dxo_d.download();
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t o = 0; o < rows; ++o) {
      double want = from_bits(storage, bias[size_t(o)]);
      for (int64_t i = 0; i < cols; ++i)
        want += double(from_bits(storage, x[size_t(t * cols + i)])) * dense[size_t(o * cols + i)];
      ASSERT_NEAR(from_bits(storage, y[size_t(t * rows + o)]), want, ulp * std::abs(want) + 1e-5)
          << "y " << t << "," << o;
    }
    for (int64_t i = 0; i < cols; ++i) {
      double want = 0.5;
      for (int64_t o = 0; o < rows; ++o)
        want += double(from_bits(storage, dy[size_t(t * rows + o)])) * dense[size_t(o * cols + i)];
      ASSERT_NEAR(from_bits(storage, dx[size_t(t * cols + i)]), want, ulp * std::abs(want) + 1e-5)
          << "dx " << t << "," << i;
    }
  }
}

TEST(Nf4Cuda, SixteenBitActivationsWithABiasRoundOnceToTheirType) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device visible";
  check_16_bit_activations<__nv_bfloat16>(DType::BF16, 1.0 / 256);
  check_16_bit_activations<__half>(DType::F16, 1.0 / 2048);
}

}  // namespace
}  // namespace dsx::kernels
