// GPT-2 124M bf16 training throughput on one GPU: forward + backward (the optimizer step is not
// included: the fused bf16/fp32-master AdamW belongs to the engine), tokens/s and MFU with
// llm.c's formula, flops/token = 6*params + 6*L*C*T, against the GPU's bf16 dense peak. Then the
// two parts issue 21 asks about, timed with CUDA events by replaying one step's calls at the
// model's shapes: the matmuls (cuBLASLt, each shape planned once) against the bf16 peak, and the
// bias gradients (deterministic two-stage column sums) against the HBM bandwidth.
// Memory, copies, fills, waits and timing go through the GPU's device::Device (device/device.h),
// on the model's own stream. Run by tests/gpu/run.sh. usage: bench_gpu_gpt2 [B T steps
// peak_tflops hbm_gbs]
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "device/cuda_device.h"
#include "dsx/error.h"
#include "kernels/cuda/decoder_layers.h"
#include "models/device_buffer.h"
#include "models/gpt2/gpt2_cuda.h"

namespace {

using dsx::device::Device;
using dsx::device::Stream;
using dsx::models::DeviceBuffer;
using dsx::models::GradSink;
using dsx::models::ParamAccess;
using dsx::models::ParamSpec;
using bf16 = __nv_bfloat16;
namespace kc = dsx::kernels::cuda;

// How long the host waits for the GPU's work before Error(Timeout).
constexpr std::chrono::minutes kGpuWait{5};

// Parameters and gradients in device memory, always resident.
class DeviceParams final : public ParamAccess, public GradSink {
 public:
  DeviceParams(Device& gpu, const dsx::models::Model& m)
      : gpu_(gpu), specs_(m.params()), params_(gpu, m.num_params()), grads_(gpu, m.num_params()) {}
  DeviceBuffer<bf16>& params() { return params_; }
  void zero_grads(Stream& on) { gpu_.fill_zero(grads_.data(), grads_.bytes(), on); }
  void acquire(int) override {}
  void release(int) override {}
  const void* param(size_t i) override { return params_.data() + specs_[i].offset; }
  void* grad(size_t i) override { return grads_.data() + specs_[i].offset; }
  void ready(int) override {}
  bool orders_after_device_work() const override { return true; }  // nothing reads them mid-step

 private:
  Device& gpu_;
  std::vector<ParamSpec> specs_;
  DeviceBuffer<bf16> params_, grads_;
};

// Milliseconds of `body` per call, from timed events around `reps` calls on `on`.
double time_ms(Device& gpu, Stream& on, int reps, const std::function<void()>& body) {
  body();  // warm-up: plans are built, scratch allocated
  auto start = gpu.create_timed_event(), stop = gpu.create_timed_event();
  on.record(*start);
  for (int i = 0; i < reps; ++i) body();
  on.record(*stop);
  gpu.synchronize(*stop, kGpuWait, "the timed calls");
  return 1e3 * gpu.seconds_between(*start, *stop) / reps;
}

struct Linear {
  int C, OC;
  bool bias;
};

// The command line: batch, sequence, timed steps, and the limits the figures are compared with.
struct BenchArgs {
  int B = 8, T = 1024, steps = 10;
  double peak = 989.0;  // H100/H200 SXM dense bf16 TFLOPS
  double hbm = 4800.0;  // H200 HBM3e GB/s (H100 SXM: 3350)
};

BenchArgs parse_args(int argc, char** argv) {
  BenchArgs a;
  if (argc > 1) a.B = std::atoi(argv[1]);
  if (argc > 2) a.T = std::atoi(argv[2]);
  if (argc > 3) a.steps = std::atoi(argv[3]);
  if (argc > 4) a.peak = std::atof(argv[4]);
  if (argc > 5) a.hbm = std::atof(argv[5]);
  return a;
}

struct StepTiming {
  double step_ms, tokens_per_s, mfu;
  float loss;  // of the last step
};

// 1. The whole step, forward and backward on random tokens, after two untimed steps.
StepTiming time_steps(dsx::models::GPT2Cuda<bf16>& model, Stream& on, DeviceParams& p,
                      const dsx::models::GPT2Config& c, const BenchArgs& a) {
  const int B = a.B, T = a.T, steps = a.steps;
  std::mt19937_64 rng(2);
  std::vector<int32_t> x(size_t(B) * T), y(size_t(B) * T);
  for (auto& t : x) t = static_cast<int32_t>(rng() % c.vocab_size);
  for (auto& t : y) t = static_cast<int32_t>(rng() % c.vocab_size);
  double total = 0;
  float loss = 0;
  for (int step = 0; step < steps + 2; ++step) {
    auto t0 = std::chrono::steady_clock::now();
    p.zero_grads(on);
    loss = model.forward(x.data(), y.data(), B, T, p);
    model.backward(p, p, 1.0f);
    on.synchronize(kGpuWait);
    if (step >= 2) total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const double tokens_per_s = double(B) * T * steps / total;
  const double flops_per_token = 6.0 * model.num_params() + 6.0 * c.num_layers * c.channels * T;
  return {1e3 * total / steps, tokens_per_s, tokens_per_s * flops_per_token / (a.peak * 1e12), loss};
}

// The matmuls of one step, at the model's shapes.
std::vector<Linear> step_linears(const dsx::models::GPT2Config& c) {
  const int C = c.channels, Vp = c.padded_vocab_size;
  std::vector<Linear> linears;
  for (int l = 0; l < c.num_layers; ++l) {
    linears.push_back({C, 3 * C, true});      // qkv
    linears.push_back({C, C, true});          // attention projection
    linears.push_back({C, 4 * C, true});      // fc
    linears.push_back({4 * C, C, true});      // fc projection
  }
  linears.push_back({C, Vp, false});          // classifier (tied wte), no bias
  return linears;
}

struct PartTiming {
  double matmul_ms, bias_ms, matmul_tflops, bias_gbs;
};

// 2. One step's matmuls and bias gradients, replayed at the model's shapes on `on`.
PartTiming time_parts(Device& gpu, Stream& on, const std::vector<Linear>& linears, size_t N, int C, int Vp) {
  const auto s = static_cast<cudaStream_t>(on.native());
  auto bf16s = [&gpu](size_t n) { return DeviceBuffer<bf16>(gpu, n); };  // zero-filled
  DeviceBuffer<bf16> in = bf16s(N * 4 * C), dinp = bf16s(N * 4 * C), w = bf16s(size_t(Vp) * C);
  DeviceBuffer<bf16> dw = bf16s(size_t(Vp) * C), out = bf16s(N * Vp), db = bf16s(4 * C);
  for (auto* a : {&in, &w, &out}) gpu.fill_bytes(a->data(), 0x3c, a->bytes(), on);
  DeviceBuffer<float> workspace(gpu, (kc::DecoderBlas::workspace_bytes(4 * size_t(C)) + 3) / 4);
  kc::DecoderBlas blas({workspace.data(), workspace.bytes()});
  const int reps = 3;
  double matmul_flops = 0, bias_bytes = 0;
  for (const auto& L : linears) {
    matmul_flops += 3 * 2.0 * double(N) * L.C * L.OC;  // forward, dinp, dweight
    if (L.bias) bias_bytes += double(N) * L.OC * 2;
  }
  const double matmul_ms = time_ms(gpu, on, reps, [&] {
    for (const auto& L : linears) {
      kc::decoder_matmul_forward(blas, out.data(), in.data(), w.data(), L.bias ? w.data() : nullptr, N, L.C, L.OC, s);
      kc::decoder_matmul_backward(blas, dinp.data(), dw.data(), static_cast<bf16*>(nullptr), out.data(), in.data(),
                               w.data(), N, L.C, L.OC, s);
    }
  });
  const double bias_ms = time_ms(gpu, on, reps, [&] {
    for (const auto& L : linears) {
      if (L.bias) kc::decoder_bias_backward(blas, db.data(), out.data(), N, L.OC, s);
    }
  });
  return {matmul_ms, bias_ms, matmul_flops / (matmul_ms * 1e-3) / 1e12, bias_bytes / (bias_ms * 1e-3) / 1e9};
}

}  // namespace

int main(int argc, char** argv) try {
  const BenchArgs a = parse_args(argc, argv);
  auto c = dsx::models::gpt2_preset("gpt2-124M");
  const std::unique_ptr<Device> gpu = dsx::device::make_cuda_device();
  dsx::models::GPT2Cuda<bf16> model(c, a.B, a.T);
  // The model's stream, adopted (not owned) so the bench's fills, waits and events share its order.
  const std::unique_ptr<Stream> on = gpu->adopt_stream(model.stream(), "bench_gpu_gpt2");
  DeviceParams p(*gpu, model);
  std::vector<uint16_t> init(model.num_params());
  model.init_params(init.data(), 1);
  gpu->copy_now(p.params().data(), init.data(), init.size() * 2);

  const StepTiming step = time_steps(model, *on, p, c, a);
  const std::vector<Linear> linears = step_linears(c);
  const PartTiming parts = time_parts(*gpu, *on, linears, size_t(a.B) * a.T, c.channels, c.padded_vocab_size);

  std::printf("GPT-2 124M bf16 fwd+bwd, B%d T%d, %d steps; loss %.3f; %zu matmul plans built for the model's "
              "%zu matmul calls a step\n",
              a.B, a.T, a.steps, step.loss, model.blas().plans_built(), 3 * linears.size());
  std::printf("| part | ms/step | share of step | achieved | limit | ratio |\n");
  std::printf("|---|---|---|---|---|---|\n");
  std::printf("| forward+backward | %.2f | 100%% | %.0f tokens/s | %.0f TFLOPS bf16 | MFU %.1f%% |\n", step.step_ms,
              step.tokens_per_s, a.peak, 100 * step.mfu);
  std::printf("| matmuls (%zu fwd + %zu bwd) | %.2f | %.1f%% | %.0f TFLOPS | %.0f TFLOPS | %.1f%% |\n", linears.size(),
              linears.size(), parts.matmul_ms, 100 * parts.matmul_ms / step.step_ms, parts.matmul_tflops, a.peak,
              100 * parts.matmul_tflops / a.peak);
  std::printf("| bias gradients (%d) | %.3f | %.2f%% | %.0f GB/s | %.0f GB/s | %.1f%% |\n", 4 * c.num_layers,
              parts.bias_ms, 100 * parts.bias_ms / step.step_ms, parts.bias_gbs, a.hbm, 100 * parts.bias_gbs / a.hbm);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_gpu_gpt2: %s\n", e.what());
  return 1;
}
