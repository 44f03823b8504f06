// ZeRO stages 0-3 device-resident on one GPU (the cuda device: partitions, buckets, the fused
// CUDA optimizers, all in device memory) against the same ZeRO on the cpu device: the same
// gradients, three AdamW steps, the same weights within 1e-6 of each weight's magnitude (both
// run the same element formulas without FMA contraction; only the sum-of-squares order of the
// clipping norm may differ). One rank over ofi (the collectives of a world of one are copies),
// two ranks over ofi on one GPU, staging device memory through the host, and one rank over nccl,
// whose stream-ordered collectives run on the GPU's streams (against the cpu device over ofi);
// and a bf16 model's mixed-precision layout (16-bit copies beside fp32 masters) on one rank.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "device/cpu_device.h"
#include "device/cuda_device.h"
#include "kernels/mixed_precision.h"
#include "tests/comm/comm_harness.h"
#include "tests/gpu/visible_gpus.h"
#include "tests/models/temp_dir.h"
#include "tests/zero/hand_backward.h"

namespace {

using namespace std::chrono_literals;

constexpr int kLayers = 4;
const auto kParams = dsx::test::params_of(kLayers, 3001);

// Rank r's gradient of element k of layer l: a fixed pattern, written through the device.
float grad_value(int rank, int layer, size_t k) {
  return 0.01f * static_cast<float>(
                     (k * 7 + static_cast<size_t>(layer) * 3 + static_cast<size_t>(rank)) % 11) -
         0.05f;
}

std::vector<float> train(dsx::device::Device& device, dsx::comm::Communicator& comm, int stage,
                         dsx::kernels::DType dtype = dsx::kernels::DType::F32) {
  dsx::zero::ZeroOptions o;
  o.stage = stage;
  o.model_dtype = dtype;
  o.comm_dtype = dtype;
  o.overlap_comm = true;
  o.reduce_bucket_size = 5000;
  o.prefetch_bucket_size = 7000;
  o.param_persistence_threshold = 0;
  o.gradient_clipping = 1.0;
  o.optimizer.adam.lr = 1e-2f;
  o.optimizer.adam.weight_decay = 0.1f;
  o.comm_timeout = 60s;
  std::vector<float> init(dsx::test::total(kParams));
  for (size_t i = 0; i < init.size(); ++i) init[i] = 0.02f * std::sin(static_cast<float>(i));
  dsx::zero::ZeroEngine z(kParams, kLayers, init.data(), o, comm, device);
  auto& compute = device.compute_stream();
  std::vector<float> host;
  std::vector<uint16_t> host16;
  for (int step = 0; step < 3; ++step) {
    dsx::test::forward(z, kLayers);
    z.begin_backward();
    for (int l = kLayers - 1; l >= 0; --l) {
      z.acquire(l);
      for (size_t i = 0; i < kParams.size(); ++i) {
        if (kParams[i].info.layer != l) continue;
        host.resize(kParams[i].info.numel);
        for (size_t k = 0; k < host.size(); ++k) host[k] = grad_value(comm.rank(), l, k);
        if (dtype == dsx::kernels::DType::F32) {
          device.copy(z.grad(i), host.data(), host.size() * 4, compute);
        } else {
          host16.resize(host.size());
          dsx::kernels::cast(dsx::kernels::DType::F32, host.data(), dtype, host16.data(),
                             host.size());
          device.copy(z.grad(i), host16.data(), host16.size() * 2, compute);
        }
        compute.synchronize(60s);  // `host` is reused
      }
      z.release(l);
      z.grad_ready(l);
    }
    z.end_micro_step();
    z.step({1e-2, {}, {}});
  }
  std::vector<float> weights(init.size());
  z.gather_params(weights.data());
  return weights;
}

double worst_difference(const std::vector<float>& got, const std::vector<float>& want) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(
        worst, std::abs(double(got[i]) - want[i]) / std::max(1e-3, std::abs(double(want[i]))));
  }
  return worst;
}

void compare(int stage, int world) {
  auto job = dsx::test::run_job(
      world, dsx::test::test_options("tcp"),
      [&](dsx::comm::Communicator& comm, int rank) {
        // One GPU: every rank on it, which the device choice allows when ofi carries the
        // collectives.
        setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
        setenv("DSX_COMM_BACKEND", "ofi", 1);
        auto cpu = dsx::device::make_cpu_device();
        auto gpu = dsx::device::make_cuda_device();
        const std::vector<float> want = train(*cpu, comm, stage);
        const std::vector<float> got = train(*gpu, comm, stage);
        const double worst = worst_difference(got, want);
        if (rank == 0)
          std::printf("stage %d, %d rank(s): worst relative difference %.3g\n", stage, world,
                      worst);
        if (!(worst <= 1e-6))
          throw std::runtime_error("stage " + std::to_string(stage) + ": GPU weights differ by " +
                                   std::to_string(worst));
      },
      300s);
  EXPECT_TRUE(job.all_ok()) << job.summary();
}

class GpuZero : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(GpuZero, DeviceResidentMatchesTheCpuDevice) {
  if (dsx::test::visible_gpus() == 0) GTEST_SKIP() << "no GPU visible";
  const auto [stage, world] = GetParam();
  compare(stage, world);
}

// One rank over nccl: the reference comes from the cpu device over ofi in a job of its own (nccl
// reads GPU memory only).
TEST(GpuZeroNccl, DeviceResidentOverNcclMatchesTheCpuDevice) {
  if (dsx::test::visible_gpus() == 0) GTEST_SKIP() << "no GPU visible";
  for (int stage = 0; stage <= 3; ++stage) {
    // A temporary folder, not the build's: a bundle (tools/gpu_bundle.sh) runs far from it.
    const dsx::test::TempDir dir;
    const std::string path = dir.file("zero-ref");
    auto ref = dsx::test::run_job(
        1, dsx::test::test_options("tcp"),
        [&](dsx::comm::Communicator& comm, int) {
          auto cpu = dsx::device::make_cpu_device();
          const std::vector<float> w = train(*cpu, comm, stage);
          std::ofstream(path, std::ios::binary)
              .write(reinterpret_cast<const char*>(w.data()),
                     static_cast<std::streamsize>(w.size() * 4));
        },
        300s);
    ASSERT_TRUE(ref.all_ok()) << ref.summary();
    auto options = dsx::test::test_options("tcp");
    options.backend = "nccl";
    auto job = dsx::test::run_job(
        1, options,
        [&](dsx::comm::Communicator& comm, int) {
          auto gpu = dsx::device::make_cuda_device();  // the GPU the nccl backend chose
          const std::vector<float> got = train(*gpu, comm, stage);
          std::vector<float> want(got.size());
          std::ifstream(path, std::ios::binary)
              .read(reinterpret_cast<char*>(want.data()),
                    static_cast<std::streamsize>(want.size() * 4));
          const double worst = worst_difference(got, want);
          std::printf("stage %d over nccl: worst relative difference %.3g\n", stage, worst);
          if (!(worst <= 1e-6))
            throw std::runtime_error("GPU weights over nccl differ by " + std::to_string(worst));
        },
        300s);
    EXPECT_TRUE(job.all_ok()) << "stage " << stage << ": " << job.summary();
  }
}

// A bf16 model: 16-bit parameters and gradients beside fp32 master partitions on the GPU, one
// rank, against the cpu device; the same kernels, so the weight vectors agree to 1e-3 (a value
// near a bf16 rounding boundary may round the other way after a differently ordered norm).
TEST(GpuZeroBf16, MixedPrecisionLayoutMatchesTheCpuDevice) {
  if (dsx::test::visible_gpus() == 0) GTEST_SKIP() << "no GPU visible";
  auto job = dsx::test::run_job(
      1, dsx::test::test_options("tcp"),
      [&](dsx::comm::Communicator& comm, int) {
        setenv("DSX_COMM_BACKEND", "ofi", 1);
        auto cpu = dsx::device::make_cpu_device();
        auto gpu = dsx::device::make_cuda_device();
        for (int stage = 0; stage <= 3; ++stage) {
          const auto want = train(*cpu, comm, stage, dsx::kernels::DType::BF16);
          const auto got = train(*gpu, comm, stage, dsx::kernels::DType::BF16);
          double diff = 0, norm = 0;
          for (size_t i = 0; i < want.size(); ++i) {
            diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
            norm += double(want[i]) * want[i];
          }
          const double rel = std::sqrt(diff / norm);
          std::printf("stage %d bf16: relative difference %.3g\n", stage, rel);
          if (!(rel <= 1e-3))
            throw std::runtime_error("bf16 stage " + std::to_string(stage) + " differs by " +
                                     std::to_string(rel));
        }
      },
      300s);
  EXPECT_TRUE(job.all_ok()) << job.summary();
}

INSTANTIATE_TEST_SUITE_P(Stages, GpuZero,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3),
                                            ::testing::Values(1, 2)));

}  // namespace
