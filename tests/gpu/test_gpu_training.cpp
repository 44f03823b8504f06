// `dsx train --device cuda` against `--device cpu`: the same config, seed and data give the same
// trained weights (fp32 within 1e-3 of each tensor's largest magnitude after a few AdamW steps;
// the GPU sums in another order), at ZeRO stages 0 and 3 with 2 ranks; bf16 on the GPU learns as
// fp32 does (final loss within 5%). The ZeRO state stays on the host (DeviceBridge), so the
// ranks reduce over the ofi backend in host memory; that also lets both ranks share one GPU, as
// on a one-GPU machine, where NCCL would refuse two ranks of one communicator on one GPU.
// Skips without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <regex>
#include <string>

#include "models/io/gpt2_weights.h"
#include "tests/comm/free_port.h"
#include "tests/models/temp_dir.h"
#include "tests/tools/run_command.h"

namespace {

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

std::string config(const dsx::test::TempDir& dir, int stage, bool bf16) {
  const std::string path = dir.file("ds_" + std::to_string(stage) + (bf16 ? "_bf16" : "") + ".json");
  std::ofstream(path) << R"({"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.01}},
    "bf16": {"enabled": )" << (bf16 ? "true" : "false") << R"(},
    "zero_optimization": {"stage": )" << stage << R"(, "reduce_bucket_size": 20000}})";
  return path;
}

// nccl needs device memory and a GPU per rank; DeviceBridge's ZeRO buffers are host memory.
constexpr const char* kBackend = "ofi";

dsx::test::CommandResult train(const std::string& device, const std::string& cfg, const std::string& save, int steps) {
  return dsx::test::run_command(std::string("OMP_NUM_THREADS=1 DSX_COMM_BACKEND=") + kBackend + " timeout 600 " + DSX_EXE +
                                " launch --num_gpus 2 --master_port " +
                                std::to_string(dsx::test::free_port()) + " " + DSX_EXE + " train --device " + device +
                                " --deepspeed_config " + cfg + " --steps " + std::to_string(steps) +
                                " --progress plain --samples 0 --eval_interval 0 --save " + save);
}

double final_loss(const std::string& output) {
  std::smatch m;
  std::regex re(R"(loss\s+[\d.]+ first, ([\d.]+) final)");
  return std::regex_search(output, m, re) ? std::stod(m[1]) : -1;
}

}  // namespace

TEST(GpuTraining, SameWeightsAsTheCpuAtStages0And3) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  for (int stage : {0, 3}) {
    dsx::test::TempDir dir;
    const std::string cfg = config(dir, stage, false);
    auto gpu = train("cuda", cfg, dir.file("gpu"), 5);
    ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
    EXPECT_NE(gpu.output.find("on the GPU"), std::string::npos) << gpu.output;
    EXPECT_NE(gpu.output.find("2 rank(s) over " + std::string(kBackend)), std::string::npos) << gpu.output;
    auto cpu = train("cpu", cfg, dir.file("cpu"), 5);
    ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
    const auto a = dsx::models::load_gpt2_weights(dir.file("gpu/model.safetensors"));
    const auto b = dsx::models::load_gpt2_weights(dir.file("cpu/model.safetensors"));
    ASSERT_EQ(a.params.size(), b.params.size());
    double largest = 0, worst = 0;
    for (size_t i = 0; i < a.params.size(); ++i) {
      largest = std::max(largest, std::fabs(static_cast<double>(b.params[i])));
      worst = std::max(worst, std::fabs(static_cast<double>(a.params[i]) - b.params[i]));
    }
    EXPECT_LT(worst, 1e-3 * largest) << "stage " << stage;
  }
}

TEST(GpuTraining, Bf16LearnsAsFp32Does) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  dsx::test::TempDir dir;
  auto bf16 = train("cuda", config(dir, 2, true), dir.file("bf16"), 60);
  ASSERT_EQ(bf16.exit_code, 0) << bf16.output;
  auto fp32 = train("cuda", config(dir, 2, false), dir.file("fp32"), 60);
  ASSERT_EQ(fp32.exit_code, 0) << fp32.output;
  const double lb = final_loss(bf16.output), lf = final_loss(fp32.output);
  ASSERT_GT(lf, 0) << fp32.output;
  EXPECT_LT(std::fabs(lb - lf), 0.05 * lf) << "bf16 " << lb << " vs fp32 " << lf;
}
