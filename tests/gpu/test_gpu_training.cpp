// `dsx train --device cuda` against `--device cpu`: the same config, seed and data give the same
// trained weights (fp32 within 1e-3 of each tensor's largest magnitude after a few AdamW steps;
// the GPU sums in another order). Without offload ZeRO keeps its state in GPU memory: 2 ranks on a
// one-GPU machine share it and talk over ofi (NCCL refuses two ranks on one GPU), 1 rank talks
// over nccl; with offload_optimizer the ZeRO-Offload arrangement (host state, DeviceBridge) must
// train to the same weights. A run saved and resumed on the GPU matches one that was not; bf16
// on the GPU learns as fp32 does (final loss within 5%); the same for the Llama family (llama-tiny).
// Skips without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "models/io/gpt2_weights.h"
#include "models/io/hf_folder.h"
#include "tests/comm/free_port.h"
#include "tests/models/temp_dir.h"
#include "tests/tools/run_command.h"

namespace {

// The dsx this build made, or the one DSX_EXE names: a bundle (tools/gpu_bundle.sh, run by
// tests/gpu/run.sh --bundle) runs far from the build folder baked in here.
std::string dsx_exe() {
  const char* named = std::getenv("DSX_EXE");
  return named != nullptr && *named != '\0' ? named : DSX_EXE;
}

double max_relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 1e30;
  double largest = 0, worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    largest = std::max(largest, std::fabs(static_cast<double>(b[i])));
    worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  return largest > 0 ? worst / largest : worst;
}

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

std::string config(const dsx::test::TempDir& dir, int stage, bool bf16, bool offload = false) {
  const std::string path =
      dir.file("ds_" + std::to_string(stage) + (bf16 ? "_bf16" : "") + (offload ? "_offload" : "") + ".json");
  std::ofstream(path) << R"({"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.01}},
    "bf16": {"enabled": )" << (bf16 ? "true" : "false") << R"(},
    "zero_optimization": {"stage": )" << stage << R"(, "reduce_bucket_size": 20000)"
                      << (offload ? R"(, "offload_optimizer": {"device": "cpu"})" : "") << "}}";
  return path;
}

// `extra`: more `dsx train` flags (--load DIR, ...).
dsx::test::CommandResult train(const std::string& device, const std::string& cfg, const std::string& save, int steps,
                               int ranks = 2, const std::string& extra = "") {
  return dsx::test::run_command("OMP_NUM_THREADS=1 timeout 600 " + dsx_exe() + " launch --num_gpus " +
                                std::to_string(ranks) + " --master_port " + std::to_string(dsx::test::free_port()) +
                                " " + dsx_exe() + " train --device " + device + " --deepspeed_config " + cfg +
                                " --steps " + std::to_string(steps) +
                                " --progress plain --samples 0 --eval_interval 0 --save " + save + " " + extra);
}

// The largest difference of two saved models, relative to the largest magnitude of `b`'s; a
// Llama-family save (config.json of that family beside the weights) is read as such.
double relative_difference(const std::string& a_dir, const std::string& b_dir) {
  const bool llama = dsx::models::hf_folder_is_llama_family(a_dir);
  const auto a = llama ? dsx::models::read_llama_hf_folder(a_dir).params
                       : dsx::models::load_gpt2_weights(a_dir + "/model.safetensors").params;
  const auto b = llama ? dsx::models::read_llama_hf_folder(b_dir).params
                       : dsx::models::load_gpt2_weights(b_dir + "/model.safetensors").params;
  return max_relative_difference(a, b);
}


double final_loss(const std::string& output) {
  std::smatch m;
  std::regex re(R"(loss\s+[\d.]+ first, ([\d.]+) final)");
  return std::regex_search(output, m, re) ? std::stod(m[1]) : -1;
}

}  // namespace

TEST(GpuTraining, DeviceResidentZeroGivesTheCpusWeightsAtEveryStage) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  for (int stage : {0, 1, 2, 3}) {
    dsx::test::TempDir dir;
    const std::string cfg = config(dir, stage, false);
    auto gpu = train("cuda", cfg, dir.file("gpu"), 5);
    ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
    EXPECT_NE(gpu.output.find("on the GPU"), std::string::npos) << gpu.output;
    EXPECT_NE(gpu.output.find("ZeRO state in GPU memory"), std::string::npos) << gpu.output;
    EXPECT_NE(gpu.output.find("ZeRO holds on rank 0 (cuda:"), std::string::npos) << gpu.output;
    auto cpu = train("cpu", cfg, dir.file("cpu"), 5);
    ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
    EXPECT_LT(relative_difference(dir.file("gpu"), dir.file("cpu")), 1e-3) << "stage " << stage;
  }
}

TEST(GpuTraining, OneRankOverNcclAndTheOffloadArrangementAgree) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  dsx::test::TempDir dir;
  auto nccl = train("cuda", config(dir, 2, false), dir.file("nccl"), 5, 1);
  ASSERT_EQ(nccl.exit_code, 0) << nccl.output;
  EXPECT_NE(nccl.output.find("1 rank(s) over nccl"), std::string::npos) << nccl.output;
  auto offload = train("cuda", config(dir, 2, false, true), dir.file("offload"), 5, 1);
  ASSERT_EQ(offload.exit_code, 0) << offload.output;
  EXPECT_NE(offload.output.find("ZeRO-Offload (offload_optimizer"), std::string::npos) << offload.output;
  auto cpu = train("cpu", config(dir, 2, false), dir.file("cpu"), 5, 1);
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  EXPECT_LT(relative_difference(dir.file("nccl"), dir.file("cpu")), 1e-3);
  EXPECT_LT(relative_difference(dir.file("offload"), dir.file("nccl")), 1e-3);
}

TEST(GpuTraining, AResumedDeviceResidentRunMatchesAnUninterruptedOne) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  dsx::test::TempDir dir;
  const std::string cfg = config(dir, 3, true);
  auto whole = train("cuda", cfg, dir.file("whole"), 6);
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  auto first = train("cuda", cfg, dir.file("part"), 3);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  auto rest = train("cuda", cfg, dir.file("part"), 6, 2, "--load " + dir.file("part"));
  ASSERT_EQ(rest.exit_code, 0) << rest.output;
  EXPECT_NE(rest.output.find("resumed from"), std::string::npos) << rest.output;
  EXPECT_LT(relative_difference(dir.file("part"), dir.file("whole")), 1e-5);
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

// The Llama family through the whole engine on the GPU (LlamaCuda on ZeRO's device, 2 ranks sharing
// it over ofi): the CPU's weights at every stage in fp32, and bf16 (cuDNN's fused attention where
// it runs) learning as fp32 does.
TEST(GpuTraining, TheLlamaFamilyTrainsOnTheGpuAsOnTheCpu) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  for (int stage : {0, 1, 2, 3}) {
    dsx::test::TempDir dir;
    const std::string cfg = config(dir, stage, false);
    auto gpu = train("cuda", cfg, dir.file("gpu"), 5, 2, "--model llama-tiny");
    ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
    EXPECT_NE(gpu.output.find("on the GPU"), std::string::npos) << gpu.output;
    auto cpu = train("cpu", cfg, dir.file("cpu"), 5, 2, "--model llama-tiny");
    ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
    EXPECT_LT(relative_difference(dir.file("gpu"), dir.file("cpu")), 1e-3) << "stage " << stage;
  }
  dsx::test::TempDir dir;
  auto bf16 = train("cuda", config(dir, 2, true), dir.file("bf16"), 60, 2, "--model llama-tiny");
  ASSERT_EQ(bf16.exit_code, 0) << bf16.output;
  auto fp32 = train("cuda", config(dir, 2, false), dir.file("fp32"), 60, 2, "--model llama-tiny");
  ASSERT_EQ(fp32.exit_code, 0) << fp32.output;
  const double lb = final_loss(bf16.output), lf = final_loss(fp32.output);
  ASSERT_GT(lf, 0) << fp32.output;
  EXPECT_LT(std::fabs(lb - lf), 0.05 * lf) << "bf16 " << lb << " vs fp32 " << lf;
}
