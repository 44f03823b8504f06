// `dsx train --lora --device cuda` against `--device cpu`: the same config, seed, data and adapter
// (dropout on) give the same loss at every step (as printed, 4 decimals) and the same trained
// adapter (within 1e-4 of each tensor's largest magnitude after a few AdamW steps: the GPU sums
// in another order) and charge the frozen base to the ledger's params alike; `dsx export --peft`
// writes the GPU run's adapter as PEFT's folder; a resumed GPU run ends on the uninterrupted
// run's adapter bytes. At ZeRO stage 3 the frozen base is partitioned in GPU memory and gathered
// per layer: on one GPU, and on two as two ranks over nccl (DSX_EMULATED_GPUS=2 on the emulated
// GPU), the run gives stage 2's losses and adapter, and each of two ranks keeps half the base
// (to a few elements of padding), in the model's dtype (bf16 on two). Stage 3 with ZeRO
// offloaded to the host is refused, naming what to do. Skips without a GPU (the two-rank case
// without two). GPT-2 from a Hugging Face folder trains on the GPU as on the CPU, its loss
// falls, and its exported adapter loads onto the base.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "models/io/safetensors.h"
#include "models/local_params.h"
#include "models/lora/lora_factory.h"
#include "models/lora/peft_adapter.h"
#include "models/model_source.h"
#include "tests/comm/free_port.h"
#include "tests/engine/test_files.h"
#include "tests/models/temp_dir.h"
#include "tests/tools/run_command.h"

namespace {

std::string dsx_exe() {
  const char* named = std::getenv("DSX_EXE");
  return named != nullptr && *named != '\0' ? named : DSX_EXE;
}

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

int gpu_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

// `zero_extra`: more keys of zero_optimization (after a comma).
std::string config(const dsx::test::TempDir& dir, int stage, const std::string& zero_extra = "",
                   bool bf16 = false) {
  const std::string path =
      dir.file("ds_" + std::to_string(stage) + (zero_extra.empty() ? "" : "x") +
               (bf16 ? "_bf16" : "") + ".json");
  std::ofstream(path) << R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
    "bf16": {"enabled": )"
                      << (bf16 ? "true" : "false") << R"(},
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-2, "weight_decay": 0.01}},
    "zero_optimization": {"stage": )"
                      << stage << zero_extra << "}}";
  return path;
}

const std::string kLora = "r=4,alpha=8,dropout=0.1,targets=all-linear";

// `extra`: more `dsx train` flags (--load DIR, ...).
dsx::test::CommandResult train(const std::string& device, const std::string& cfg,
                               const std::string& save, int steps = 4,
                               const std::string& lora = kLora, const std::string& extra = "",
                               int ranks = 1) {
  return dsx::test::run_command(
      "OMP_NUM_THREADS=1 timeout 600 " + dsx_exe() + " launch --num_gpus " + std::to_string(ranks) +
      " --master_port " + std::to_string(dsx::test::free_port()) + " " + dsx_exe() +
      " train --device " + device + " --deepspeed_config " + cfg + " --model llama-tiny --lora " +
      lora + " --steps " + std::to_string(steps) +
      " --progress plain --samples 0 --eval_interval 0 --save " + save + " " + extra);
}

// `dsx train --lora` of the tiny transformers GPT-2 (tests/models/data/gpt2) on a shard of a
// repeating 8-token sequence, which its adapters learn quickly. SGD: with AdamW at lr 5e-2 the
// devices' adapters ended 7% apart, most likely as Adam's first steps move every element by about
// lr whatever its gradient's size (a near-zero gradient whose sign rounding flips moves 2 lr).
// `bf16`: bf16.enabled at ZeRO stage 1 (else fp32 at stage 2).
dsx::test::CommandResult train_gpt2(const std::string& device, const dsx::test::TempDir& dir,
                                    const std::string& save, bool bf16 = false) {
  std::vector<uint16_t> tokens(2048);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>(i % 8 * 5);
  const std::string data = dsx::test::write_token_shard(dir.path(), tokens, 64);
  std::ofstream(dir.file("ds_gpt2.json"))
      << R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
    "zero_allow_untested_optimizer": true, "optimizer": {"type": "SGD", "params": {"lr": 1.0}},
    "bf16": {"enabled": )"
      << (bf16 ? "true" : "false") << R"(}, "zero_optimization": {"stage": )" << (bf16 ? 1 : 2)
      << "}}";
  return dsx::test::run_command(
      "OMP_NUM_THREADS=1 timeout 600 " + dsx_exe() + " launch --num_gpus 1 --master_port " +
      std::to_string(dsx::test::free_port()) + " " + dsx_exe() + " train --device " + device +
      " --deepspeed_config " + dir.file("ds_gpt2.json") + " --model " + DSX_SOURCE_DIR +
      "/tests/models/data/gpt2 --data shards:" + data +
      " --seq_len 8 --lora r=4,alpha=16,dropout=0.1,targets=all-linear --steps 8 --progress plain"
      " --samples 0 --eval_interval 0 --save " +
      save);
}

std::vector<std::string> step_losses(const std::string& output) {
  std::vector<std::string> losses;
  const std::regex re(R"(step \d+/\d+ \| loss ([\d.]+))");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), re);
       it != std::sregex_iterator(); ++it)
    losses.push_back((*it)[1]);
  return losses;
}

// The largest difference of two adapter files' tensors, relative to each of b's largest magnitude.
double adapter_difference(const std::string& a_file, const std::string& b_file) {
  const dsx::models::SafetensorsReader a(a_file), b(b_file);
  double worst = 0;
  if (a.tensors().size() != b.tensors().size()) return 1e30;
  for (const auto& [name, view] : b.tensors()) {
    const auto* ta = a.find(name);
    const auto* tb = &view;
    if (!ta || ta->numel() != tb->numel()) return 1e30;
    const auto* x = reinterpret_cast<const float*>(ta->data);
    const auto* y = reinterpret_cast<const float*>(tb->data);
    double diff = 0, scale = 1e-30;
    for (size_t i = 0; i < tb->numel(); ++i) {
      diff = std::max(diff, std::fabs(double(x[i]) - y[i]));
      scale = std::max(scale, std::fabs(double(y[i])));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

}  // namespace

TEST(GpuLoraTraining, TrainsAsTheCpuDoesAndExportsItsAdapter) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  dsx::test::TempDir dir;
  const std::string cfg = config(dir, 2);
  auto gpu = train("cuda", cfg, dir.file("gpu"));
  ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
  EXPECT_NE(gpu.output.find("on the GPU"), std::string::npos) << gpu.output;
  EXPECT_NE(gpu.output.find("LoRA: the"), std::string::npos) << gpu.output;
  auto cpu = train("cpu", cfg, dir.file("cpu"));
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  // The ledger charges the frozen base to params on either device (fp32: the same bytes).
  const std::regex params(R"(ZeRO holds on rank 0 \([a-z:0-9]+\): params ([\d.]+ MB))");
  std::smatch pg, pc;
  ASSERT_TRUE(std::regex_search(gpu.output, pg, params)) << gpu.output;
  ASSERT_TRUE(std::regex_search(cpu.output, pc, params)) << cpu.output;
  EXPECT_EQ(pg[1], pc[1]);
  EXPECT_NE(pc[1], "0.04 MB");  // the adapters alone
  const auto lg = step_losses(gpu.output), lc = step_losses(cpu.output);
  ASSERT_EQ(lc.size(), 4u) << cpu.output;
  EXPECT_EQ(lg, lc) << gpu.output << cpu.output;
  EXPECT_LT(adapter_difference(dir.file("gpu/adapter_model.safetensors"),
                               dir.file("cpu/adapter_model.safetensors")),
            1e-4);

  auto peft = dsx::test::run_command(dsx_exe() + " export " + dir.file("gpu") + " --peft " +
                                     dir.file("peft"));
  ASSERT_EQ(peft.exit_code, 0) << peft.output;
  EXPECT_EQ(dsx::test::read_all(dir.file("peft/adapter_model.safetensors")),
            dsx::test::read_all(dir.file("gpu/adapter_model.safetensors")));
  EXPECT_NE(
      dsx::test::read_all(dir.file("peft/adapter_config.json")).find("\"peft_type\": \"LORA\""),
      std::string::npos);
}

// The checkpoint keeps the adapters and their Adam state: 2 steps, saved, resumed to 4, end on
// the bytes of 4 steps straight (dropout on: the resumed run's masks continue from the
// checkpoint's micro-steps).
TEST(GpuLoraTraining, AResumedRunEndsOnTheUninterruptedRunsAdapter) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  dsx::test::TempDir dir;
  const std::string cfg = config(dir, 1), lora = "r=4,alpha=8,dropout=0.1,targets=q_proj,v_proj";
  auto first = train("cuda", cfg, dir.file("out"), 2, lora);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  auto resumed = train("cuda", cfg, dir.file("out"), 4, lora, "--load " + dir.file("out"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("at step 2"), std::string::npos) << resumed.output;
  auto straight = train("cuda", cfg, dir.file("straight"), 4, lora);
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  EXPECT_EQ(dsx::test::read_all(dir.file("out/adapter_model.safetensors")),
            dsx::test::read_all(dir.file("straight/adapter_model.safetensors")));
}

// Stage 3 against stage 2 on `ranks` GPUs, in fp32 or bf16: the same losses and adapter; the
// base partitioned in the model's dtype, each rank keeping 1/ranks of it (to a padding element per
// layer and rank).
void expect_stage_three_trains_as_stage_two(int ranks, bool bf16, const std::string& lora) {
  dsx::test::TempDir dir;
  // A layer gathered ahead and a tiny persistence threshold: every layer's gather is exercised.
  const std::string zero3 =
      R"(, "stage3_prefetch_bucket_size": 20000, "stage3_param_persistence_threshold": 10)";
  auto two = train("cuda", config(dir, 2, "", bf16), dir.file("two"), 4, lora, "", ranks);
  ASSERT_EQ(two.exit_code, 0) << two.output;
  auto three = train("cuda", config(dir, 3, zero3, bf16), dir.file("three"), 4, lora, "", ranks);
  ASSERT_EQ(three.exit_code, 0) << three.output;
  EXPECT_NE(two.output.find("whole on every rank"), std::string::npos) << two.output;
  const std::regex kept(
      R"(the base's (\d+) are frozen, partitioned over the ranks \(in GPU memory: this rank )"
      R"(keeps (\d+) bytes, and gathers at most (\d+) for a layer\))");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(three.output, m, kept)) << three.output;
  const double element = bf16 ? 2.0 : 4.0;
  const double base_bytes = element * std::stod(m[1]), held = std::stod(m[2]);
  EXPECT_GE(held, base_bytes / ranks);
  EXPECT_LE(held,
            base_bytes / ranks + element * 4 * ranks);  // llama-tiny: 4 layers of base weights
  EXPECT_LT(std::stod(m[3]), base_bytes / 2);           // a layer, not the model
  const auto l2 = step_losses(two.output), l3 = step_losses(three.output);
  ASSERT_EQ(l2.size(), 4u) << two.output;
  EXPECT_EQ(l3, l2) << three.output << two.output;
  EXPECT_LT(adapter_difference(dir.file("three/adapter_model.safetensors"),
                               dir.file("two/adapter_model.safetensors")),
            1e-5);
}

TEST(GpuLoraTraining, StageThreePartitionsTheBaseAndTrainsAsStageTwo) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  expect_stage_three_trains_as_stage_two(1, false, kLora);
}

// bf16 (the base's shares 16-bit), with the embedding, head and final norm trained in full (read
// from ZeRO's stage-3 gathers, their frozen copies partitioned too): stage 2 and 3 end on the same
// adapter bytes (measured).
TEST(GpuLoraTraining, TwoRanksAtStageThreeInBf16KeepHalfTheBaseEachAndTrainAsStageTwo) {
  if (gpu_count() < 2) GTEST_SKIP() << "needs two GPUs";
  expect_stage_three_trains_as_stage_two(
      2, true, kLora + ",modules_to_save=lm_head,embed_tokens,model.norm");
}

TEST(GpuLoraTraining, StageThreeWithZeroOnTheHostIsRefused) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  dsx::test::TempDir dir;
  auto r =
      train("cuda", config(dir, 3, R"(, "offload_optimizer": {"device": "cpu"})"), dir.file("out"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("partitions the frozen base in the GPU memory ZeRO keeps its state in"),
            std::string::npos)
      << r.output;
}

// GPT-2 (transformers' Conv1D projections, all four adapted, dropout on; ZeRO 2, SGD) on the GPU
// and on the CPU: the same loss at every step as printed, falling; adapters within 1e-4 of each
// tensor's largest magnitude; the GPU run's exported adapter loads onto the base folder (PEFT's
// reader, the CPU model) and changes its logits. In bf16 at ZeRO 1 the GPU's losses stay within
// 2e-3 of fp32's (8e-4 measured).
TEST(GpuLoraTraining, Gpt2TrainsAsTheCpuDoesAndItsAdapterLoads) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  dsx::test::TempDir dir;
  auto gpu = train_gpt2("cuda", dir, dir.file("gpu"));
  ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
  EXPECT_NE(gpu.output.find("on the GPU"), std::string::npos) << gpu.output;
  auto cpu = train_gpt2("cpu", dir, dir.file("cpu"));
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  const auto lg = step_losses(gpu.output), lc = step_losses(cpu.output);
  ASSERT_EQ(lc.size(), 8u) << cpu.output;
  EXPECT_EQ(lg, lc) << gpu.output << cpu.output;
  EXPECT_LT(std::stod(lg.back()), std::stod(lg.front()) - 0.1) << gpu.output;
  EXPECT_LT(adapter_difference(dir.file("gpu/adapter_model.safetensors"),
                               dir.file("cpu/adapter_model.safetensors")),
            1e-4);
  auto bf16 = train_gpt2("cuda", dir, dir.file("bf16"), /*bf16=*/true);
  ASSERT_EQ(bf16.exit_code, 0) << bf16.output;
  const auto lb = step_losses(bf16.output);
  ASSERT_EQ(lb.size(), lc.size()) << bf16.output;
  for (size_t i = 0; i < lb.size(); ++i)
    EXPECT_NEAR(std::stod(lb[i]), std::stod(lc[i]), 2e-3) << "step " << i + 1;

  auto peft = dsx::test::run_command(dsx_exe() + " export " + dir.file("gpu") + " --peft " +
                                     dir.file("peft"));
  ASSERT_EQ(peft.exit_code, 0) << peft.output;
  namespace m = dsx::models;
  const std::string folder = std::string(DSX_SOURCE_DIR) + "/tests/models/data/gpt2";
  const std::vector<int32_t> x = {0, 5, 10, 15, 20, 25, 30, 35};
  // The base with the exported adapter, or with zeros in its place (the base alone).
  auto logits = [&](bool with_adapter) {
    m::ModelSource base = m::load_model_source(folder);
    m::ModelBuildOptions options;
    options.max_batch = 1, options.max_seq = 8;
    const std::string adapter = dir.file("peft");
    auto model =
        m::make_lora_model(base.shape, std::move(base.initial),
                           m::read_peft_adapter_config(adapter + "/adapter_config.json"), options);
    m::LocalParams<float> params(*model);  // zeros
    if (with_adapter) m::read_peft_adapter_weights(adapter, model->params(), params.params());
    model->forward(x.data(), nullptr, 1, 8, params);
    return model->logits();
  };
  const auto adapted = logits(true), plain = logits(false);
  ASSERT_EQ(adapted.size(), plain.size());
  double moved = 0;
  for (size_t i = 0; i < adapted.size(); ++i)
    moved = std::max(moved, std::fabs(double(adapted[i]) - plain[i]));
  EXPECT_GT(moved, 1e-3);
}
