// The unscale and clip factor computed on the device and read there by the optimizer kernels
// (kernels/clip_math.h, kernels/optimizer_math.h's GradFactor): the kernel's factor has the bits
// of DeepSpeed's ZeRO rule worked out in double on the host, and every fused optimizer given the
// factor through device memory writes the bits it writes when given the same value as a host
// scalar. Skips when no GPU is visible.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/clip_math.h"
#include "kernels/cuda/mixed_precision.h"
#include "kernels/cuda/optimizers.h"

namespace dsx::kernels::test {
namespace {

bool gpu_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Device floats holding a host vector's values; freed on scope exit.
class DeviceFloats {
 public:
  explicit DeviceFloats(const std::vector<float>& values) : n_(values.size()) {
    cuda_ok(cudaMalloc(&ptr_, n_ * sizeof(float) + 8), "cudaMalloc");
    cuda_ok(cudaMemcpy(ptr_, values.data(), n_ * sizeof(float), cudaMemcpyHostToDevice), "upload");
  }
  ~DeviceFloats() { cudaFree(ptr_); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  float* get() const { return static_cast<float*>(ptr_); }
  std::vector<float> download() const {
    std::vector<float> out(n_);
    cuda_ok(cudaDeviceSynchronize(), "synchronize");
    cuda_ok(cudaMemcpy(out.data(), ptr_, n_ * sizeof(float), cudaMemcpyDeviceToHost), "download");
    return out;
  }

 private:
  void* ptr_ = nullptr;
  size_t n_;
};

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// The engine's host arithmetic before the factor moved to the device, written out again here.
float host_rule(double sum_sq, double loss_scale, double max_norm) {
  double combined = loss_scale;
  if (max_norm > 0.0 && std::isfinite(sum_sq)) {
    const double c = (std::sqrt(sum_sq) / loss_scale + 1e-6) / max_norm;
    if (c > 1.0) combined *= c;
  }
  return static_cast<float>(1.0 / combined);
}

float device_rule(double sum_sq, bool fp32, double loss_scale, double max_norm) {
  DeviceFloats factor({-7.0f});
  void* sum = nullptr;
  cuda_ok(cudaMalloc(&sum, sizeof(double)), "cudaMalloc");
  const float narrow = static_cast<float>(sum_sq);
  cuda_ok(cudaMemcpy(sum, fp32 ? static_cast<const void*>(&narrow) : &sum_sq,
                     fp32 ? sizeof(float) : sizeof(double), cudaMemcpyHostToDevice),
          "upload");
  cuda::zero_grad_factor({sum, fp32}, loss_scale, max_norm, factor.get(), 0);
  const float out = factor.download()[0];
  cudaFree(sum);
  return out;
}

TEST(GpuGradFactor, ZeroRuleHasTheHostsBits) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device visible";
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    double sum_sq, loss_scale, max_norm;
  };
  const std::vector<Case> cases = {{0.1681, 1, 0.1},    {0.1681, 1, 1.0},    {0.1681, 1, 0.0},
                                   {3.7e9, 65536, 0.5}, {3.7e9, 65536, 1e6}, {1.234567e-3, 1, 0.03},
                                   {0.0, 1, 1.0},       {inf, 1024, 1.0},    {nan, 1024, 1.0},
                                   {2.5e17, 4096, 0.5}, {1e-30, 1, 1e-20},   {9.99e-13, 1, 1e-6}};
  int clipped = 0;
  for (const Case& c : cases) {
    for (bool fp32 : {false, true}) {
      const double sum = fp32 ? double(static_cast<float>(c.sum_sq)) : c.sum_sq;
      const float want = host_rule(sum, c.loss_scale, c.max_norm);
      const float got = device_rule(c.sum_sq, fp32, c.loss_scale, c.max_norm);
      EXPECT_EQ(bits(got), bits(want))
          << "sum " << c.sum_sq << (fp32 ? " (fp32)" : " (fp64)") << " scale " << c.loss_scale
          << " max_norm " << c.max_norm << ": device " << got << ", host " << want;
      EXPECT_EQ(bits(zero_grad_factor(sum, c.loss_scale, c.max_norm)), bits(want));
      clipped += want != static_cast<float>(1.0 / c.loss_scale);
    }
  }
  EXPECT_GE(clipped, 10) << "the cases should clip in most of them";
}

std::vector<float> normal(size_t n, float mean, float stddev, unsigned seed,
                          bool positive = false) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(mean, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = positive ? std::fabs(d(rng)) : d(rng);
  return v;
}

// Runs `step` over fresh copies of (param, grad, state a, state b) and returns them.
template <class Step>
std::vector<std::vector<float>> stepped(size_t n, Step&& step) {
  DeviceFloats p(normal(n, 0, 1, 1)), g(normal(n, 0, 0.1f, 2)), a(normal(n, 0, 0.05f, 3)),
      b(normal(n, 0.01f, 0.01f, 4, true));
  step(p.get(), g.get(), a.get(), b.get());
  return {p.download(), a.download(), b.download()};
}

// Each optimizer given `value` at a device pointer (host part 1), and as a host scalar.
template <class Step>
void expect_device_factor_read(const std::string& what, Step&& step) {
  const float value = 0.3718f;
  const size_t n = 1027;  // a vector body and a scalar tail
  DeviceFloats factor({value});
  const auto on_device = stepped(n, [&](float* p, float* g, float* a, float* b) {
    step(GradFactor(1.0f, factor.get()), p, g, a, b);
  });
  const auto on_host = stepped(
      n, [&](float* p, float* g, float* a, float* b) { step(GradFactor(value), p, g, a, b); });
  const auto unscaled = stepped(
      n, [&](float* p, float* g, float* a, float* b) { step(GradFactor(1.0f), p, g, a, b); });
  for (size_t t = 0; t < on_host.size(); ++t)
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(bits(on_device[t][i]), bits(on_host[t][i]))
          << what << " buffer " << t << " element " << i;
  EXPECT_NE(on_host, unscaled) << what << ": the factor should change the step";
}

TEST(GpuGradFactor, OptimizersReadTheDeviceFactor) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device visible";
  AdamHyper adam;
  adam.weight_decay = 0.1f;
  expect_device_factor_read("adam", [&](GradFactor f, float* p, float* g, float* a, float* b) {
    cuda::adam_step(adam, 3, f, p, g, a, b, 1027, {}, 0);
  });
  LionHyper lion;
  expect_device_factor_read("lion", [&](GradFactor f, float* p, float* g, float* a, float*) {
    cuda::lion_step(lion, f, p, g, a, 1027, {}, 0);
  });
  SgdHyper sgd;
  sgd.momentum = 0.9f;
  expect_device_factor_read("sgd", [&](GradFactor f, float* p, float* g, float* a, float*) {
    cuda::sgd_step(sgd, 2, f, p, g, a, 1027, {}, 0);
  });
  AdagradHyper adagrad;
  expect_device_factor_read("adagrad", [&](GradFactor f, float* p, float* g, float* a, float*) {
    cuda::adagrad_step(adagrad, f, p, g, a, 1027, {}, 0);
  });
}

// LAMB's first phase reads the factor too; its moments show it.
TEST(GpuGradFactor, LambPrepareReadsTheDeviceFactor) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device visible";
  const size_t offsets[2] = {0, 1027};
  void* table = nullptr;
  cuda_ok(cudaMalloc(&table, sizeof(offsets)), "cudaMalloc");
  cuda_ok(cudaMemcpy(table, offsets, sizeof(offsets), cudaMemcpyHostToDevice), "upload");
  const cuda::LambLayout layout{static_cast<const size_t*>(table), offsets, 1};
  std::vector<float> scratch(cuda::lamb_workspace_bytes(layout) / sizeof(float) + 4);
  DeviceFloats work(scratch), norms(std::vector<float>(4));
  expect_device_factor_read("lamb", [&](GradFactor f, float* p, float* g, float* a, float* b) {
    cuda::lamb_prepare(LambHyper{}, 2, f, p, g, a, b, layout,
                       reinterpret_cast<double*>(norms.get()), work.get(), 0);
  });
  cudaFree(table);
}

}  // namespace
}  // namespace dsx::kernels::test
