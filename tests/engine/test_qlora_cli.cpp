// `dsx train --lora --load-in-4bit` end to end on one rank: a bf16 Llama folder is quantised to
// NF4 at load and its adapters train, the loss falling over a few steps; the memory ledger counts
// the frozen NF4 base beside the adapters' states, and the model states it reports are within 10%
// of what `dsx estimate --method qlora --precision fp32` predicts for that model; ZeRO stage 3 and
// --load-in-4bit without --lora are refused, naming what to do.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <string>

#include "models/io/hf_folder.h"
#include "models/model_source.h"
#include "tests/models/temp_dir.h"
#include "tests/tools/run_command.h"
#include "tools/estimate/hf_config.h"
#include "tools/estimate/memory_model.h"

using dsx::test::run_command;
namespace est = dsx::estimate;

namespace {

// A bf16 Llama whose vocabulary covers the addition task's bytes.
void write_model_folder(const std::string& dir) {
  dsx::models::ModelShape shape;
  shape.family = dsx::models::ModelShape::Family::Llama;
  auto& c = shape.llama;
  c.vocab_size = 256, c.hidden_size = 64, c.intermediate_size = 128, c.num_layers = 2;
  c.num_heads = 4, c.num_kv_heads = 2, c.head_dim = 16, c.max_position_embeddings = 64;
  const std::vector<float> weights = dsx::models::initial_parameters(shape, 7);
  dsx::models::HfWriteOptions options;
  options.dtype = dsx::kernels::DType::BF16;
  dsx::models::write_llama_hf_folder(dir, c, weights.data(), options);
}

std::string write_config(const dsx::test::TempDir& dir, int stage) {
  const std::string path = dir.file("ds_config" + std::to_string(stage) + ".json");
  std::ofstream(path) << R"({"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 1,
    "steps_per_print": 100, "optimizer": {"type": "AdamW", "params": {"lr": 2e-2, "weight_decay": 0.0}},
    "zero_optimization": {"stage": )"
                      << stage << "}}";
  return path;
}

dsx::test::CommandResult train(const std::string& args) {
  return run_command("OMP_NUM_THREADS=1 timeout 120 " + std::string(DSX_EXE) +
                     " train --progress plain --eval_interval 0 --eval_samples 10 --samples 0 " +
                     args);
}

double megabytes(const std::string& output, const std::string& kind) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex("rank 0 holds .*\\b" + kind + " ([0-9.e+-]+) MB")))
    return -1;
  return std::stod(m[1]);
}

}  // namespace

TEST(QloraCli, TrainsOnAnNf4BaseAndTheLedgerMatchesTheEstimate) {
  dsx::test::TempDir dir;
  const std::string model = dir.file("llama");
  write_model_folder(model);
  const std::string lora = " --lora r=4,alpha=8,targets=all-linear";
  auto run = train(
      "--deepspeed_config " + write_config(dir, 2) + " --model " + model + lora +
      " --load-in-4bit --bnb-4bit-use-double-quant --bnb-4bit-compute-dtype bfloat16 --steps 30");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("QLoRA: block linears in NF4"), std::string::npos) << run.output;
  std::smatch loss;
  ASSERT_TRUE(
      std::regex_search(run.output, loss, std::regex("loss +([0-9.]+) first, ([0-9.]+) final")))
      << run.output;
  EXPECT_LT(std::stod(loss[2]), std::stod(loss[1]) - 0.3) << run.output;

  est::EstimateRequest r;
  r.model = est::read_hf_config(model + "/config.json");
  r.precision = est::Precision::Fp32;  // the CPU path trains in fp32
  r.adapter = {4, {"all-linear"}, true};
  r.activations.seq_len = 9, r.activations.micro_batch = 8;
  r.cluster = {1, 1};
  r.gpu_memory_bytes = int64_t{1} << 40;
  const auto e = est::estimate_memory(r, {2, est::Offload::None, est::Method::Qlora});
  const double ledger = megabytes(run.output, "params") + megabytes(run.output, "grads") +
                        megabytes(run.output, "optimizer");
  const double predicted = static_cast<double>(e.gpu_model_states) / 1e6;
  std::printf("model states per rank: ledger %.6f MB, dsx estimate %.6f MB\n", ledger, predicted);
  EXPECT_NEAR(ledger, predicted, 0.10 * predicted) << run.output;
}

TEST(QloraCli, RefusesStageThreeAndFourBitWithoutLora) {
  dsx::test::TempDir dir;
  const std::string model = dir.file("llama");
  write_model_folder(model);
  auto stage3 = train("--deepspeed_config " + write_config(dir, 3) + " --model " + model +
                      " --lora r=4 --load-in-4bit --steps 2");
  EXPECT_NE(stage3.exit_code, 0);
  EXPECT_NE(stage3.output.find("ZeRO stage 3 does not partition an NF4 base"), std::string::npos)
      << stage3.output;
  auto no_lora = train("--deepspeed_config " + write_config(dir, 2) + " --model " + model +
                       " --load-in-4bit --steps 2");
  EXPECT_NE(no_lora.exit_code, 0);
  EXPECT_NE(no_lora.output.find("add --lora"), std::string::npos) << no_lora.output;
}
