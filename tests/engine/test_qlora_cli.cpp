// QLoRA through the dsx command, end to end:
// - `dsx train --lora --load-in-4bit` on a bf16 folder (one rank, ZeRO 2): the loss falls; the
//   memory ledger's model states (the NF4 base counted as params) are within 10% of `dsx estimate
//   --method qlora --precision fp32`; the checkpoint records how the base was quantised, so
//   `dsx export --merged` dequantises that base (fp16 compute here) and adds the adapters, and
//   `dsx sample --lora-adapter --load-in-4bit` generates what the merged model generates;
// - ZeRO 3 on two ranks: the NF4 base partitioned, the loss falls, the ledger within 10% of the
//   estimate's stage-3 row, and a run resumed halfway ends on the same adapter bytes;
// - on a folder bitsandbytes saved (tests/models/data/llama_bytes_bnb_nf4) from PEFT's adapter
//   (llama_bytes_qlora), `dsx export --merged` equals what PEFT's merge_and_unload computes before
//   it quantises again (dequantize_bnb_weight(W) + delta), `--peft` gives PEFT's adapter back, and
//   sampling with the adapter equals sampling the merged export;
// - --load-in-4bit without --lora, and a bitsandbytes folder sampled without an adapter, refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <regex>
#include <string>

#include "kernels/nf4_tensor.h"
#include "models/io/hf_folder.h"
#include "models/io/safetensors.h"
#include "models/model_source.h"
#include "tests/comm/free_port.h"
#include "tests/models/temp_dir.h"
#include "tests/tools/run_command.h"
#include "tools/estimate/hf_config.h"
#include "tools/estimate/memory_model.h"

using dsx::test::run_command;
namespace est = dsx::estimate;

namespace {

const std::string kData = std::string(DSX_SOURCE_DIR) + "/tests/models/data/";
const std::string kLora = " --lora r=4,alpha=8,targets=all-linear";

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

std::string write_config(const dsx::test::TempDir& dir, int stage, double lr = 2e-2) {
  const std::string path =
      dir.file("ds_config" + std::to_string(stage) + "_" + std::to_string(lr) + ".json");
  std::ofstream(path) << R"({"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 1,
    "steps_per_print": 100, "optimizer": {"type": "AdamW", "params": {"lr": )"
                      << lr << R"(, "weight_decay": 0.0}}, "zero_optimization": {"stage": )"
                      << stage << "}}";
  return path;
}

const std::string kTrain =
    " train --progress plain --eval_interval 0 --eval_samples 10 --samples 0 ";

dsx::test::CommandResult train(const std::string& args) {
  return run_command("OMP_NUM_THREADS=1 timeout 120 " + std::string(DSX_EXE) + kTrain + args);
}

dsx::test::CommandResult train_on_two_ranks(const std::string& args) {
  const std::string launch = std::string(DSX_EXE) + " launch --num_gpus 2 --master_port " +
                             std::to_string(dsx::test::free_port()) + " ";
  return run_command("OMP_NUM_THREADS=1 timeout 120 " + launch + DSX_EXE + kTrain + args);
}

dsx::test::CommandResult dsx_command(const std::string& args) {
  return run_command("OMP_NUM_THREADS=1 timeout 60 " + std::string(DSX_EXE) + " " + args);
}

double megabytes(const std::string& output, const std::string& kind) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex("rank 0 holds .*\\b" + kind + " ([0-9.e+-]+) MB")))
    return -1;
  return std::stod(m[1]);
}

void expect_loss_falls(const std::string& output, double by) {
  std::smatch loss;
  ASSERT_TRUE(std::regex_search(output, loss, std::regex("loss +([0-9.]+) first, ([0-9.]+) final")))
      << output;
  EXPECT_LT(std::stod(loss[2]), std::stod(loss[1]) - by) << output;
}

// The ledger's model states of rank 0 beside `dsx estimate`'s QLoRA row for the folder.
void expect_ledger_matches_estimate(const std::string& output, const std::string& model, int stage,
                                    int ranks, bool double_quant) {
  est::EstimateRequest r;
  r.model = est::read_hf_config(model + "/config.json");
  r.precision = est::Precision::Fp32;  // the CPU path trains in fp32
  r.adapter = {4, {"all-linear"}, double_quant};
  r.activations.seq_len = 9, r.activations.micro_batch = 8;
  r.cluster = {ranks, 1};
  r.gpu_memory_bytes = int64_t{1} << 40;
  const auto e = est::estimate_memory(r, {stage, est::Offload::None, est::Method::Qlora});
  const double ledger =
      megabytes(output, "params") + megabytes(output, "grads") + megabytes(output, "optimizer");
  const double predicted = static_cast<double>(e.gpu_model_states) / 1e6;
  std::printf("stage %d, %d rank(s): model states per rank: ledger %.6f MB, dsx estimate %.6f MB\n",
              stage, ranks, ledger, predicted);
  EXPECT_NEAR(ledger, predicted, 0.10 * predicted) << output;
}

// What `dsx sample` generates greedily after a fixed byte prompt.
std::string greedy(const std::string& args) {
  const auto run = dsx_command("sample " + args + " --prompt 12+34= --tokens 12 --temperature 0");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  return run.output;
}

// One tensor of a safetensors file, as fp32 (F32 or BF16 stored).
std::vector<float> tensor(const std::string& file, const std::string& name) {
  const dsx::models::SafetensorsReader r(file);
  const auto* t = r.find(name);
  if (!t) throw std::runtime_error(file + " lacks " + name);
  std::vector<float> v(t->numel());
  const auto type = t->dtype == "BF16" ? dsx::kernels::DType::BF16 : dsx::kernels::DType::F32;
  for (size_t i = 0; i < v.size(); ++i) v[i] = dsx::kernels::load_as_float(type, t->data, i);
  return v;
}

// Largest |got - want| relative to the largest |want|.
double relative_gap(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double gap = 0, size = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i)
    gap = std::max(gap, std::abs(static_cast<double>(got[i]) - want[i])),
    size = std::max<double>(size, std::abs(want[i]));
  return gap / size;
}

// W dequantised as bitsandbytes would hold it (NF4, no double quantisation, fp16 compute) plus
// scale * B @ A, in double: the merged weight a --load-in-4bit run's export must write.
std::vector<float> merged_reference(const std::string& model, const std::string& adapter,
                                    const std::string& name, double scale) {
  const std::vector<float> w = tensor(model + "/model.safetensors", name + ".weight");
  const std::vector<float> a =
      tensor(adapter + "/adapter_model.safetensors", "base_model.model." + name + ".lora_A.weight");
  const std::vector<float> b =
      tensor(adapter + "/adapter_model.safetensors", "base_model.model." + name + ".lora_B.weight");
  const int64_t r = 4, in = static_cast<int64_t>(a.size()) / r,
                out = static_cast<int64_t>(b.size()) / r;
  const auto nf4 = dsx::kernels::nf4_quantize_matrix(
      w.data(), dsx::kernels::DType::F32, out, in,
      {.double_quant = false, .compute = dsx::kernels::DType::F16});
  std::vector<float> merged(w.size());
  dsx::kernels::nf4_dequantize_rows(merged.data(), nf4, 0, out);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t c = 0; c < in; ++c) {
      double d = 0;
      for (int64_t k = 0; k < r; ++k) d += static_cast<double>(b[o * r + k]) * a[k * in + c];
      merged[o * in + c] = static_cast<float>(merged[o * in + c] + scale * d);
    }
  return merged;
}

}  // namespace

TEST(QloraCli, TrainsOnAnNf4BaseExportsMergedAndSamples) {
  dsx::test::TempDir dir;
  const std::string model = dir.file("llama"), out = dir.file("out");
  write_model_folder(model);
  const std::string quantise = " --load-in-4bit --bnb-4bit-compute-dtype float16";
  auto run = train("--deepspeed_config " + write_config(dir, 2) + " --model " + model + kLora +
                   quantise + " --steps 30 --save " + out);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("QLoRA: block linears in NF4"), std::string::npos) << run.output;
  expect_loss_falls(run.output, 0.3);
  expect_ledger_matches_estimate(run.output, model, 2, 1, false);

  auto merged = dsx_command("export " + out + " --out " + dir.file("merged") + " --merged");
  ASSERT_EQ(merged.exit_code, 0) << merged.output;
  for (const std::string name :
       {"model.layers.0.self_attn.q_proj", "model.layers.1.mlp.down_proj"}) {
    const double gap = relative_gap(tensor(dir.file("merged/model.safetensors"), name + ".weight"),
                                    merged_reference(model, out, name, 2.0));
    std::printf("%s merged: largest gap %.3g of the largest weight\n", name.c_str(), gap);
    EXPECT_LT(gap, 1e-6) << name;
  }
  EXPECT_EQ(greedy(model + " --lora-adapter " + out + quantise), greedy(dir.file("merged")));
}

TEST(QloraCli, StageThreeOnTwoRanksPartitionsTheNf4BaseAndResumes) {
  dsx::test::TempDir dir;
  const std::string model = dir.file("llama");
  write_model_folder(model);
  const std::string args =
      "--deepspeed_config " + write_config(dir, 3) + " --model " + model + kLora +
      " --load-in-4bit --bnb-4bit-use-double-quant --bnb-4bit-compute-dtype bfloat16";
  auto run = train_on_two_ranks(args + " --steps 30 --save " + dir.file("whole"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("partitioned over the ranks (QLoRA: block linears in NF4"),
            std::string::npos)
      << run.output;
  expect_loss_falls(run.output, 0.3);
  expect_ledger_matches_estimate(run.output, model, 3, 2, true);
  // 15 steps, then 15 more from the checkpoint: the same adapter, byte for byte.
  ASSERT_EQ(train_on_two_ranks(args + " --steps 15 --save " + dir.file("split")).exit_code, 0);
  auto resumed = train_on_two_ranks(args + " --steps 30 --load " + dir.file("split") + " --save " +
                                    dir.file("split"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from"), std::string::npos) << resumed.output;
  EXPECT_EQ(dsx::test::run_command("cmp " + dir.file("whole/adapter_model.safetensors") + " " +
                                   dir.file("split/adapter_model.safetensors"))
                .exit_code,
            0);
}

TEST(QloraCli, MergedExportOfABitsandbytesFolderEqualsPeftsMerge) {
  dsx::test::TempDir dir;
  const std::string base = kData + "llama_bytes_bnb_nf4", adapter = kData + "llama_bytes_qlora";
  const std::string out = dir.file("out");
  // One step at learning rate 0: a checkpoint whose adapter is PEFT's, unchanged.
  auto run = train("--deepspeed_config " + write_config(dir, 0, 0.0) + " --model " + base +
                   " --lora " + adapter + " --steps 1 --save " + out);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_EQ(dsx_command("export " + out + " --out " + dir.file("merged") + " --merged").exit_code,
            0);
  ASSERT_EQ(dsx_command("export " + out + " --peft " + dir.file("peft")).exit_code, 0);
  const std::string merged = dir.file("merged/model.safetensors");
  const dsx::models::SafetensorsReader peft_merged(adapter + "/merged.safetensors");
  ASSERT_EQ(peft_merged.tensors().size(), 3u);
  for (const auto& [name, t] : peft_merged.tensors()) {
    const double gap =
        relative_gap(tensor(merged, name), tensor(adapter + "/merged.safetensors", name));
    std::printf("%s: dsx's merge beside PEFT's, largest gap %.3g of the largest weight\n",
                name.c_str(), gap);
    EXPECT_LT(gap, 1e-6) << name;
  }
  // What bitsandbytes left dense (bf16) is exported as it is.
  EXPECT_EQ(tensor(merged, "lm_head.weight"),
            tensor(base + "/model.safetensors", "lm_head.weight"));
  EXPECT_EQ(dsx::test::run_command("grep -c quantization_config " + dir.file("merged/config.json"))
                .output,
            "0\n");
  const dsx::models::SafetensorsReader peft_adapter(adapter + "/adapter_model.safetensors");
  for (const auto& [name, t] : peft_adapter.tensors())
    EXPECT_EQ(tensor(dir.file("peft/adapter_model.safetensors"), name),
              tensor(adapter + "/adapter_model.safetensors", name))
        << name;
  EXPECT_EQ(greedy(base + " --lora-adapter " + out), greedy(dir.file("merged")));
}

TEST(QloraCli, RefusesFourBitWithoutAnAdapter) {
  dsx::test::TempDir dir;
  const std::string model = dir.file("llama");
  write_model_folder(model);
  auto no_lora = train("--deepspeed_config " + write_config(dir, 2) + " --model " + model +
                       " --load-in-4bit --steps 2");
  EXPECT_NE(no_lora.exit_code, 0);
  EXPECT_NE(no_lora.output.find("add --lora"), std::string::npos) << no_lora.output;
  auto sample = dsx_command("sample " + kData + "llama_bytes_bnb_nf4 --prompt 1+2=");
  EXPECT_NE(sample.exit_code, 0);
  EXPECT_NE(sample.output.find("add --lora-adapter"), std::string::npos) << sample.output;
}
