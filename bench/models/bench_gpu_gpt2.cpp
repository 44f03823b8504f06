// GPT-2 124M bf16 training throughput on one GPU: forward + backward (the optimizer step is not
// included: the fused bf16/fp32-master AdamW belongs to the engine), tokens/s and MFU with
// llm.c's formula, flops/token = 6*params + 6*L*C*T, against the GPU's bf16 dense peak.
// Run by tests/gpu/run.sh. usage: bench_gpu_gpt2 [B T steps peak_tflops]
#include <cuda_bf16.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "models/gpt2/gpt2_cuda.h"

using namespace dsx::models;

namespace {

// Parameters and gradients in device memory, always resident.
class DeviceParams final : public ParamAccess, public GradSink {
 public:
  explicit DeviceParams(const Model& m) : specs_(m.params()), params_(m.num_params()), grads_(m.num_params()) {}
  DeviceArray<__nv_bfloat16>& params() { return params_; }
  void zero_grads() { cudaMemset(grads_.data(), 0, grads_.size() * 2); }
  void acquire(int) override {}
  void release(int) override {}
  const void* param(size_t i) override { return params_.data() + specs_[i].offset; }
  void* grad(size_t i) override { return grads_.data() + specs_[i].offset; }
  void ready(int) override {}

 private:
  std::vector<ParamSpec> specs_;
  DeviceArray<__nv_bfloat16> params_, grads_;
};

}  // namespace

int main(int argc, char** argv) try {
  const int B = argc > 1 ? std::atoi(argv[1]) : 8, T = argc > 2 ? std::atoi(argv[2]) : 1024;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 10;
  const double peak = argc > 4 ? std::atof(argv[4]) : 989.0;  // H100/H200 SXM dense bf16 TFLOPS
  auto c = gpt2_preset("gpt2-124M");
  GPT2Cuda<__nv_bfloat16> model(c, B, T);
  DeviceParams p(model);
  std::vector<uint16_t> init(model.num_params());
  model.init_params(init.data(), 1);
  cudaMemcpy(p.params().data(), init.data(), init.size() * 2, cudaMemcpyHostToDevice);
  std::mt19937_64 rng(2);
  std::vector<int32_t> x(B * T), y(B * T);
  for (auto& t : x) t = static_cast<int32_t>(rng() % c.vocab_size);
  for (auto& t : y) t = static_cast<int32_t>(rng() % c.vocab_size);
  double total = 0;
  float loss = 0;
  for (int step = 0; step < steps + 2; ++step) {
    auto t0 = std::chrono::steady_clock::now();
    p.zero_grads();
    loss = model.forward(x.data(), y.data(), B, T, p);
    model.backward(p, p, 1.0f);
    cudaDeviceSynchronize();
    if (step >= 2) total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  double tokens_per_s = double(B) * T * steps / total;
  double flops_per_token = 6.0 * model.num_params() + 6.0 * c.num_layers * c.channels * T;
  double mfu = tokens_per_s * flops_per_token / (peak * 1e12);
  std::printf("| GPT-2 124M bf16 fwd+bwd, B%d T%d | %.0f tokens/s | MFU %.1f%% of %.0f TFLOPS | loss %.3f |\n", B, T,
              tokens_per_s, 100 * mfu, peak, loss);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_gpu_gpt2: %s\n", e.what());
  return 1;
}
