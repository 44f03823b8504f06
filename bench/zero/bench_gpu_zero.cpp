// One ZeRO training step of a GPT-2-124M-sized parameter set (124.4M fp32 parameters in 12
// layers plus embeddings) on one rank: device-resident on the GPU (the cuda device: gradients
// reduced, clipped, the fused CUDA AdamW step, parameters refreshed, all in GPU memory) beside
// the offload arrangement (the same ZeRO on the cpu device: host memory, the CPU AdamW), at
// stages 0-3, and beside the HBM limit of the step's optimizer traffic (28 bytes per parameter
// at the bandwidth of a device-to-device copy measured in the same run). Gradients are written
// by a copy, not by a model: this times ZeRO's own step. Prints one markdown table.
//   bench_gpu_zero [reps (default 5)]
// Run by tests/gpu/run.sh.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "comm/host_device.h"
#include "comm/session.h"
#include "device/cuda_device.h"
#include "zero/zero_engine.h"

namespace {

using Clock = std::chrono::steady_clock;

std::vector<dsx::zero::ModelParam> gpt2_124m_like() {
  std::vector<dsx::zero::ModelParam> ps;
  size_t offset = 0;
  auto add = [&](size_t n, int layer, bool decay) {
    ps.push_back({dsx::zero::ParamInfo{n, layer, decay}, offset});
    offset += n;
  };
  add(50304 * 768 + 1024 * 768, 0, true);  // embeddings
  for (int l = 1; l <= 12; ++l) {
    add(768 * 2304, l, true);
    add(2304, l, false);
    add(768 * 768, l, true);
    add(768 * 3072, l, true);
    add(3072 * 768, l, true);
    add(4 * 768 + 3072 + 768, l, false);  // norms and biases
  }
  return ps;
}

// Median seconds of `reps` steps (after one warm-up step) of ZeRO at `stage` on `device`.
double step_seconds(dsx::device::Device& device, dsx::comm::Communicator& comm, int stage,
                    int reps) {
  const auto ps = gpt2_124m_like();
  const size_t total = ps.back().model_offset + ps.back().info.numel;
  std::vector<float> init(total, 0.01f), grad(total, 1e-3f);
  dsx::zero::ZeroOptions o;
  o.stage = stage;
  o.overlap_comm = true;
  o.gradient_clipping = 1.0;
  o.comm_timeout = std::chrono::minutes(2);
  dsx::zero::ZeroEngine z(ps, 13, init.data(), o, comm, device);
  std::vector<double> times;
  for (int r = 0; r <= reps; ++r) {
    const auto t0 = Clock::now();
    z.begin_micro_step(true);
    z.begin_backward();
    for (int l = 12; l >= 0; --l) {
      z.acquire(l);
      for (size_t i = 0; i < ps.size(); ++i) {
        if (ps[i].info.layer == l) {
          device.copy(z.grad(i), grad.data() + ps[i].model_offset, ps[i].info.numel * 4,
                      device.compute_stream());
        }
      }
      z.release(l);
      z.grad_ready(l);
    }
    z.end_micro_step();
    z.step({1e-4, {}, {}});
    device.compute_stream().synchronize(std::chrono::minutes(2));
    if (r > 0) times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

double copy_bandwidth() {
  const size_t bytes = size_t{1} << 30;
  void *a = nullptr, *b = nullptr;
  if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) return 0;
  cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
  cudaDeviceSynchronize();
  const auto t0 = Clock::now();
  for (int i = 0; i < 5; ++i) cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
  cudaDeviceSynchronize();
  const double s = std::chrono::duration<double>(Clock::now() - t0).count() / 5;
  cudaFree(a);
  cudaFree(b);
  return 2.0 * static_cast<double>(bytes) / s;  // read + write
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "bench_gpu_zero: no GPU visible\n");
    return 2;
  }
  try {
    dsx::comm::RankEnv env;
    env.master.port = 29731;
    dsx::comm::CommOptions options;
    options.backend = "ofi";
    dsx::comm::Session session(env, options);
    auto gpu = dsx::device::make_cuda_device();
    auto host = dsx::comm::make_host_device();
    const double params = 124.4e6;
    const double limit_ms = 28.0 * params / copy_bandwidth() * 1e3;
    std::printf(
        "| ZeRO step, 124M fp32 parameters, 1 rank | device-resident (ms) | offload (ms) | "
        "speed-up | "
        "optimizer traffic at copy bandwidth (ms) |\n|---|---|---|---|---|\n");
    for (int stage = 0; stage <= 3; ++stage) {
      const double on_gpu = step_seconds(*gpu, session.world(), stage, reps) * 1e3;
      const double offload =
          step_seconds(*host, session.world(), stage, std::max(1, reps / 5)) * 1e3;
      std::printf("| stage %d | %.2f | %.1f | %.0fx | %.2f |\n", stage, on_gpu, offload,
                  offload / on_gpu, limit_ms);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu_zero: %s\n", e.what());
    return 1;
  }
  return 0;
}
