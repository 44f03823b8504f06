// ZeRO's unscale and clip factor (kernels/clip_math.h) as the cpu device computes it in stream
// order and hands it to the fused optimizers through "device" memory: DeepSpeed's rule against a
// long-double reference and at its edges (clipping off, a norm within max_norm, an overflow), and
// the optimizers' read of it giving the bits of the same value passed as a host scalar, under
// the stream-order checker with random delays (a step that read the factor before the kernel
// wrote it would see the 0 it was allocated with).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "device/cpu_device.h"
#include "kernels/clip_math.h"

namespace {

using dsx::device::Placement;
using namespace std::chrono_literals;

// 1 / (loss_scale * c) with c = (sqrt(sum) / loss_scale + 1e-6) / max_norm when c > 1.
double reference(double sum_sq, double loss_scale, double max_norm) {
  const long double norm = std::sqrt(static_cast<long double>(sum_sq)) / loss_scale;
  const long double c = (norm + 1e-6L) / max_norm;
  return static_cast<double>(1.0L / (loss_scale * (c > 1 ? c : 1.0L)));
}

TEST(ZeroGradFactor, FollowsDeepSpeedsRuleAndItsEdges) {
  for (double sum : {0.1681, 3.7e9, 1.234567e-3, 2.5e17, 42.0}) {
    for (double scale : {1.0, 1024.0, 65536.0}) {
      for (double max_norm : {0.03, 0.5, 1.0, 1e6}) {
        const double want = reference(sum, scale, max_norm);
        EXPECT_NEAR(dsx::kernels::zero_grad_factor(sum, scale, max_norm), want, 1e-6 * want)
            << "sum " << sum << " scale " << scale << " max_norm " << max_norm;
      }
    }
  }
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(dsx::kernels::zero_grad_factor(1e6, 4.0, 0.0), 0.25f) << "clipping off";
  EXPECT_EQ(dsx::kernels::zero_grad_factor(inf, 4.0, 1.0), 0.25f) << "overflow: unscaled only";
  EXPECT_EQ(dsx::kernels::zero_grad_factor(nan, 4.0, 1.0), 0.25f) << "NaN: unscaled only";
  EXPECT_EQ(dsx::kernels::zero_clip_divisor(0.25, 1.0, 1.0), 1.0) << "norm 0.5 within 1";
  EXPECT_EQ(dsx::kernels::zero_clip_divisor(4.0, 1.0, 1.0), (2.0 + 1e-6) / 1.0);
}

TEST(ZeroGradFactor, TheCpuDevicesOptimizerReadsItInStreamOrder) {
  dsx::device::CpuDeviceOptions options;
  options.check_order = true;
  options.max_delay_us = 200;
  auto device = dsx::device::make_cpu_device(options);
  auto& stream = device->compute_stream();
  constexpr size_t n = 1027;
  std::vector<float> init(n);
  for (size_t i = 0; i < n; ++i) init[i] = 0.01f * std::sin(0.7f * float(i));
  auto run = [&](bool on_device, bool fp32_sum) {
    auto* buf = static_cast<float*>(
        device->allocate((4 * n + 4) * sizeof(float), Placement::Private, stream));
    float *p = buf, *g = buf + n, *m = buf + 2 * n, *v = buf + 3 * n, *factor = buf + 4 * n;
    auto* sum = static_cast<double*>(device->allocate(sizeof(double), Placement::Private, stream));
    device->copy(p, init.data(), n * sizeof(float), stream);
    device->copy(g, init.data(), n * sizeof(float), stream);
    const double host_sum = 9.0;  // norm 3 / scale 2 = 1.5 > max_norm 0.5: clips
    device->copy(sum, &host_sum, sizeof(double), stream);
    if (fp32_sum) device->narrow_to_float(sum, factor + 1, 1, stream);
    const dsx::kernels::DeviceSumOfSquares at{fp32_sum ? static_cast<const void*>(factor + 1) : sum,
                                              fp32_sum};
    device->zero_grad_factor(at, 2.0, 0.5, factor, stream);
    const dsx::kernels::GradFactor gf =
        on_device ? dsx::kernels::GradFactor(1.0f, factor)
                  : dsx::kernels::GradFactor(dsx::kernels::zero_grad_factor(host_sum, 2.0, 0.5));
    device->adam_step(dsx::kernels::AdamHyper{}, 1, gf, p, g, m, v, n, {}, stream);
    std::vector<float> out(n + 1);
    device->copy(out.data(), p, n * sizeof(float), stream);
    device->copy(&out[n], factor, sizeof(float), stream);
    stream.synchronize(10s);
    device->free(buf, (4 * n + 4) * sizeof(float), stream);
    device->free(sum, sizeof(double), stream);
    return out;
  };
  const std::vector<float> host = run(false, false);
  EXPECT_EQ(host[n], dsx::kernels::zero_grad_factor(9.0, 2.0, 0.5));
  EXPECT_LT(host[n], 0.5f) << "the case should clip";
  for (bool fp32_sum : {false, true}) {
    const std::vector<float> dev = run(true, fp32_sum);
    EXPECT_EQ(0, std::memcmp(dev.data(), host.data(), (n + 1) * sizeof(float)))
        << (fp32_sum ? "fp32" : "fp64")
        << " sum: the device factor's step differs from the host scalar's";
  }
}

}  // namespace
