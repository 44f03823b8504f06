// GPT-2 124M bf16 training on one GPU through the whole engine (the Trainer: forward, backward,
// ZeRO's reductions, clipping and the fused AdamW step), at ZeRO stages 0-3, device-resident
// (ZeRO on the cuda device, one rank over nccl) beside the ZeRO-Offload arrangement
// (offload_optimizer: cpu - host state, the CPU AdamW, the DeviceBridge's copies). Tokens/s and
// MFU with llm.c's formula (flops/token = 6 * params + 6 * L * C * T) against the GPU's bf16
// dense peak; one markdown table. Random tokens: this times the engine, not learning.
// Run by tests/gpu/run.sh.
//   bench_gpu_train [B T steps peak_tflops]   (defaults 8 1024 6 989 - H100/H200 SXM)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "comm/session.h"
#include "device/cuda_device.h"
#include "config/ds_config.h"
#include "engine/trainer.h"
#include "models/data/loader.h"
#include "models/gpt2/config.h"
#include "models/gpt2/factory.h"
#include "models/gpt2/gpt2_cpu.h"

namespace {

using Clock = std::chrono::steady_clock;

// Endless random tokens, B rows of T.
class RandomTokens final : public dsx::models::DataLoader {
 public:
  RandomTokens(int B, int T, int vocab) : B_(B), T_(T), vocab_(vocab) {}
  void next(dsx::models::Batch& batch) override {
    std::uniform_int_distribution<int32_t> token(0, vocab_ - 1);
    batch.B = B_, batch.T = T_;
    batch.inputs.resize(static_cast<size_t>(B_) * T_);
    batch.targets.resize(batch.inputs.size());
    for (auto& t : batch.inputs) t = token(rng_);
    for (auto& t : batch.targets) t = token(rng_);
    ++served_;
  }
  dsx::models::LoaderPosition position() const override { return {0, 0, served_}; }
  void seek(const dsx::models::LoaderPosition& p) override { served_ = p.sample; }
  int vocab_size() const override { return vocab_; }

 private:
  int B_, T_, vocab_;
  uint64_t served_ = 0;
  std::mt19937 rng_{7};
};

struct Result {
  double tokens_per_s = 0;
  double loss = 0;
  std::string holds;  // what ZeRO holds on the rank
};

Result train(int stage, bool offload, int B, int T, int steps, uint16_t port) {
  const std::string text = R"({"train_micro_batch_size_per_gpu": )" + std::to_string(B) +
                           R"(, "gradient_accumulation_steps": 1, "gradient_clipping": 1.0, "bf16": {"enabled": true},
      "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "weight_decay": 0.1}},
      "zero_optimization": {"stage": )" + std::to_string(stage) +
                           R"(, "overlap_comm": true, "contiguous_gradients": true)" +
                           (offload ? R"(, "offload_optimizer": {"device": "cpu"})" : "") + "}}";
  const dsx::config::EngineConfig config = dsx::config::read_ds_config_text(text, "bench config", {});
  dsx::comm::RankEnv env;
  env.master.port = port;
  dsx::comm::CommOptions comm_options;
  comm_options.backend = offload ? "ofi" : "nccl";
  dsx::comm::Session session(env, comm_options);
  std::unique_ptr<dsx::device::Device> gpu = offload ? nullptr : dsx::device::make_cuda_device();
  const dsx::models::GPT2Config shape = dsx::models::gpt2_preset("gpt2-124M");
  dsx::models::GPT2Options model_options;
  model_options.cuda = true;
  model_options.dtype = dsx::kernels::DType::BF16;
  model_options.max_batch = B;
  model_options.max_seq = T;
  if (gpu) model_options.stream = gpu->compute_stream().native();
  auto model = dsx::models::make_gpt2(shape, model_options);
  std::vector<float> initial(model->num_params());
  dsx::models::GPT2Cpu<float>(shape, 1, 1).init_params(initial.data(), 1);
  dsx::engine::Trainer trainer(config, *model, session.world(), initial.data(), 0, gpu.get());
  RandomTokens data(B, T, shape.vocab_size);
  trainer.train_batch(data);  // warm-up: plans, buffers, first gathers
  const auto t0 = Clock::now();
  Result r;
  for (int s = 0; s < steps; ++s) r.loss = trainer.train_batch(data).loss;
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.tokens_per_s = static_cast<double>(steps) * B * T / seconds;
  r.holds = trainer.zero().memory().report();
  return r;
}

}  // namespace

int main(int argc, char** argv) try {
  const int B = argc > 1 ? std::atoi(argv[1]) : 8, T = argc > 2 ? std::atoi(argv[2]) : 1024;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 6;
  const double peak = argc > 4 ? std::atof(argv[4]) : 989.0;
  if (dsx::models::cuda_device_count() == 0) {
    std::fprintf(stderr, "bench_gpu_train: no GPU visible\n");
    return 2;
  }
  const dsx::models::GPT2Config shape = dsx::models::gpt2_preset("gpt2-124M");
  const double params = 124.4e6;
  const double flops_per_token = 6.0 * params + 6.0 * shape.num_layers * shape.channels * T;
  std::printf("GPT-2 124M bf16 training through the engine on one GPU, B%d T%d, %d timed steps after one\n\n", B, T,
              steps);
  std::printf("| ZeRO stage | device-resident tokens/s | MFU | offload tokens/s | MFU | resident / offload |\n");
  std::printf("|---|---|---|---|---|---|\n");
  uint16_t port = 29811;
  std::string holds;
  for (int stage = 0; stage <= 3; ++stage) {
    const Result resident = train(stage, false, B, T, steps, port++);
    const Result offload = train(stage, true, B, T, std::max(2, steps / 3), port++);
    auto mfu = [&](double tps) { return 100.0 * tps * flops_per_token / (peak * 1e12); };
    std::printf("| %d | %.0f | %.1f%% | %.0f | %.1f%% | %.1fx |\n", stage, resident.tokens_per_s,
                mfu(resident.tokens_per_s), offload.tokens_per_s, mfu(offload.tokens_per_s),
                resident.tokens_per_s / offload.tokens_per_s);
    if (stage == 2) holds = resident.holds;
    std::fflush(stdout);
  }
  std::printf("\nstage 2 device-resident, what ZeRO holds on the GPU: %s\n", holds.c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_gpu_train: %s\n", e.what());
  return 1;
}
