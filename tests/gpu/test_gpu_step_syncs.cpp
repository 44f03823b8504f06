// One blocking host synchronisation per optimizer step: ZeRO over nccl on one GPU and on two GPUs
// as two ranks, stages 0-3, fp32/bf16/fp16, gradient accumulation 1 and 4, overlap_comm with
// several buckets, gradient clipping and AdamW. The emulated GPU counts the host waits of the
// training thread (tests/gpu/step_sync_count.h); from the second step on each step, its
// micro-steps included, makes exactly one: the read of the gradients' sum of squares (on two
// ranks summed over them by a device allreduce first), which the overflow check, the norm, the
// clip and the loss scaler take on the host. An fp16 step with an Inf gradient is skipped for the
// same one wait. The weights, applied steps and loss scales match the same ZeRO on the cpu device
// with as many ranks (fp32 within 1e-6 of each weight, 16-bit within 1e-3 in L2). On a real GPU
// the weights are checked, not the count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "device/cpu_device.h"
#include "device/cuda_device.h"
#include "kernels/mixed_precision.h"
#include "tests/comm/comm_harness.h"
#include "tests/gpu/step_sync_count.h"
#include "tests/gpu/visible_gpus.h"
#include "tests/models/temp_dir.h"
#include "tests/zero/hand_backward.h"

namespace {

using namespace std::chrono_literals;
using dsx::kernels::DType;

constexpr int kLayers = 4;
constexpr int kSteps = 3;
constexpr int kOverflowStep = 2;  // fp16: an Inf gradient in this step's first micro-step
const auto kParams = dsx::test::params_of(kLayers, 300);

struct Case {
  int stage;
  DType dtype;
  int gas;
  std::string name() const {
    return "stage " + std::to_string(stage) + " " + dsx::kernels::dtype_name(dtype) + " gas " +
           std::to_string(gas);
  }
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int stage = 0; stage <= 3; ++stage)
    for (DType dtype : {DType::F32, DType::BF16, DType::F16})
      for (int gas : {1, 4}) out.push_back({stage, dtype, gas});
  return out;
}

// What a run leaves to compare: the weights, then per step whether it applied and its scale.
struct Outcome {
  std::vector<float> weights;
  std::vector<float> steps;  // applied, loss scale; per step
  dsx::test::StepSyncs syncs;
};

dsx::zero::ZeroOptions options_for(const Case& c) {
  dsx::zero::ZeroOptions o;
  o.stage = c.stage;
  o.model_dtype = c.dtype;
  o.comm_dtype = c.dtype;
  o.overlap_comm = true;
  o.reduce_bucket_size = 600;  // several buckets per backward
  o.prefetch_bucket_size = 800;
  o.param_persistence_threshold = 0;
  o.gradient_clipping = 1.0;
  o.optimizer.adam.lr = 1e-2f;
  o.optimizer.adam.weight_decay = 0.1f;
  o.comm_timeout = 60s;
  if (c.dtype == DType::F16) {
    o.loss_scaler = {
        .dynamic = true, .initial_scale_power = 8, .hysteresis = 1, .zero_semantics = c.stage > 0};
    o.check_overflow = true;
  }
  return o;
}

// Every parameter's gradient, in the model's dtype, in device memory (one upload at set-up, so
// that a micro-step's "backward" is device work only, as a model's is). Each rank's differ.
std::vector<uint8_t> gradients_in(DType dtype, int micro, int rank) {
  std::vector<float> g(dsx::test::total(kParams));
  for (size_t k = 0; k < g.size(); ++k)
    g[k] = 0.01f * static_cast<float>((k * 7 + static_cast<size_t>(micro * 3 + rank * 5)) % 11) -
           0.05f;
  std::vector<uint8_t> out(g.size() * dsx::kernels::dtype_size(dtype));
  dsx::kernels::cast(DType::F32, g.data(), dtype, out.data(), g.size());
  return out;
}

void micro_step(dsx::zero::ZeroEngine& z, dsx::device::Device& device, const Case& c,
                const uint8_t* grads, const uint8_t* inf, bool boundary) {
  auto& compute = device.compute_stream();
  z.begin_micro_step(boundary);
  for (int l = 0; l < kLayers; ++l) {
    z.prefetch(l + 1);
    z.acquire(l);
    z.release(l);
  }
  z.begin_backward();
  const float scale = static_cast<float>(z.loss_scale() / c.gas);
  const size_t esize = dsx::kernels::dtype_size(c.dtype);
  for (int l = kLayers - 1; l >= 0; --l) {
    z.acquire(l);
    for (size_t i = 0; i < kParams.size(); ++i) {
      if (kParams[i].info.layer != l) continue;
      device.sum_blocks(c.dtype, grads + kParams[i].model_offset * esize, 1, 0, scale, c.dtype,
                        z.grad(i), kParams[i].info.numel, true, compute);
      if (inf && i == 0)
        device.sum_blocks(c.dtype, inf, 1, 0, 1.0f, c.dtype, z.grad(i), 1, true, compute);
    }
    z.release(l);
    z.grad_ready(l);
  }
  z.end_micro_step();
}

Outcome train(dsx::device::Device& device, dsx::comm::Communicator& comm, const Case& c) {
  std::vector<float> init(dsx::test::total(kParams));
  for (size_t i = 0; i < init.size(); ++i) init[i] = 0.02f * std::sin(static_cast<float>(i));
  dsx::zero::ZeroEngine z(kParams, kLayers, init.data(), options_for(c), comm, device);
  auto& compute = device.compute_stream();
  const size_t esize = dsx::kernels::dtype_size(c.dtype);
  std::vector<std::vector<uint8_t>> host;
  std::vector<uint8_t*> grads;
  for (int j = 0; j < c.gas; ++j) {
    host.push_back(gradients_in(c.dtype, j, comm.rank()));
    grads.push_back(static_cast<uint8_t*>(
        device.allocate(host.back().size(), dsx::device::Placement::Private, compute)));
    device.copy(grads.back(), host.back().data(), host.back().size(), compute);
  }
  const float inf_value = std::numeric_limits<float>::infinity();
  std::vector<uint8_t> inf_host(esize);
  dsx::kernels::cast(DType::F32, &inf_value, c.dtype, inf_host.data(), 1);
  auto* inf =
      static_cast<uint8_t*>(device.allocate(esize, dsx::device::Placement::Private, compute));
  device.copy(inf, inf_host.data(), esize, compute);
  compute.synchronize(60s);
  Outcome out;
  for (int step = 0; step < kSteps; ++step) {
    out.syncs.begin_step();
    for (int j = 0; j < c.gas; ++j) {
      const bool overflow = c.dtype == DType::F16 && step == kOverflowStep && j == 0;
      micro_step(z, device, c, grads[static_cast<size_t>(j)], overflow ? inf : nullptr,
                 j == c.gas - 1);
    }
    const dsx::zero::StepResult r = z.step({1e-2, {}, {}});
    out.syncs.end_step();
    out.steps.push_back(r.applied ? 1.0f : 0.0f);
    out.steps.push_back(static_cast<float>(r.loss_scale));
  }
  for (size_t j = 0; j < grads.size(); ++j) device.free(grads[j], host[j].size(), compute);
  device.free(inf, esize, compute);
  out.weights.resize(init.size());
  z.gather_params(out.weights.data());
  return out;
}

// fp32: each weight within 1e-6 of its magnitude; 16-bit: the vectors within 1e-3 in L2 (a value
// near a rounding boundary may round the other way after a differently ordered norm).
std::string mismatch(const Case& c, const Outcome& got, const std::vector<float>& want_weights,
                     const std::vector<float>& want_steps) {
  if (got.steps != want_steps) return c.name() + ": applied steps or loss scales differ";
  double worst = 0, diff = 0, norm = 0;
  for (size_t i = 0; i < want_weights.size(); ++i) {
    const double d = double(got.weights[i]) - want_weights[i];
    worst = std::max(worst, std::abs(d) / std::max(1e-3, std::abs(double(want_weights[i]))));
    diff += d * d;
    norm += double(want_weights[i]) * want_weights[i];
  }
  const double rel = std::sqrt(diff / norm);
  const bool ok = c.dtype == DType::F32 ? worst <= 1e-6 : rel <= 1e-3;
  if (!ok)
    return c.name() + ": weights differ (worst " + std::to_string(worst) + ", L2 " +
           std::to_string(rel) + ")";
  return {};
}

// Every case on the cpu device, then on `world` GPUs over nccl, against each other.
void one_sync_per_step_and_the_cpus_weights(int world) {
  const dsx::test::TempDir dir;
  auto reference = [&](int rank) { return dir.file("reference" + std::to_string(rank)); };
  auto ref = dsx::test::run_job(
      world, dsx::test::test_options("tcp"),
      [&](dsx::comm::Communicator& comm, int rank) {
        auto cpu = dsx::device::make_cpu_device();
        std::ofstream file(reference(rank), std::ios::binary);
        for (const Case& c : cases()) {
          const Outcome o = train(*cpu, comm, c);
          file.write(reinterpret_cast<const char*>(o.weights.data()),
                     static_cast<std::streamsize>(o.weights.size() * 4));
          file.write(reinterpret_cast<const char*>(o.steps.data()),
                     static_cast<std::streamsize>(o.steps.size() * 4));
        }
      },
      300s);
  ASSERT_TRUE(ref.all_ok()) << ref.summary();
  auto options = dsx::test::test_options("tcp");
  options.backend = "nccl";
  auto job = dsx::test::run_job(
      world, options,
      [&](dsx::comm::Communicator& comm, int rank) {
        auto gpu = dsx::device::make_cuda_device();  // the GPU the nccl backend chose
        std::ifstream file(reference(rank), std::ios::binary);
        std::string failures;
        for (const Case& c : cases()) {
          const Outcome got = train(*gpu, comm, c);
          std::vector<float> weights(got.weights.size()), steps(got.steps.size());
          file.read(reinterpret_cast<char*>(weights.data()),
                    static_cast<std::streamsize>(weights.size() * 4));
          file.read(reinterpret_cast<char*>(steps.data()),
                    static_cast<std::streamsize>(steps.size() * 4));
          const std::string name = "rank " + std::to_string(rank) + " " + c.name();
          std::printf("%s\n", got.syncs.line(name).c_str());
          if (std::string m = mismatch(c, got, weights, steps); !m.empty()) failures += "\n" + m;
          failures += got.syncs.failure(name);
          if (c.dtype == DType::F16 && got.steps[2 * kOverflowStep] != 0.0f)
            failures += "\n" + c.name() + ": the step with an Inf gradient was applied";
        }
        if (!failures.empty()) throw std::runtime_error(failures);
      },
      300s);
  EXPECT_TRUE(job.all_ok()) << job.summary();
}

TEST(GpuStepSyncs, OneHostSyncPerOptimizerStepAndTheCpusWeights) {
  if (dsx::test::visible_gpus() == 0) GTEST_SKIP() << "no GPU visible";
  one_sync_per_step_and_the_cpus_weights(1);
}

TEST(GpuStepSyncs, TwoRanksOnTwoGpusSyncOncePerStepAndMatchTheCpu) {
  if (dsx::test::visible_gpus() < 2) GTEST_SKIP() << "needs two GPUs";
  one_sync_per_step_and_the_cpus_weights(2);
}

}  // namespace
