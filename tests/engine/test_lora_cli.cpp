// `dsx train --lora` end to end on two ranks at ZeRO 3, on a tiny Llama folder with the llama3
// fixture tokenizer: the run writes a PEFT adapter folder beside its checkpoint and leaves the
// base untouched; a resumed run ends on the same adapter bytes as an uninterrupted one (the
// checkpoint keeps the adapters and their Adam state); `dsx sample --lora-adapter` applies it;
// `dsx export` writes the adapter as a PEFT folder or merged into the base; a target that names no
// module is refused before training, naming it; with dropout on, a resumed run draws the masks
// an uninterrupted one does.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "models/io/hf_folder.h"
#include "models/io/safetensors.h"
#include "models/model_source.h"
#include "tests/comm/free_port.h"
#include "tests/engine/test_files.h"
#include "tests/models/temp_dir.h"
#include "tests/tools/run_command.h"
#include "tokenizer/load_tokenizer.h"

using dsx::test::read_all;
using dsx::test::run_command;

namespace {

const std::string kTokenizer = std::string(DSX_SOURCE_DIR) + "/tests/tokenizer/data/llama3";
const std::string kZero3 = std::string(DSX_SOURCE_DIR) + "/configs/zero3.json";

void write_model_folder(const std::string& dir) {
  const auto tokenizer = dsx::tokenizer::load_tokenizer(kTokenizer);
  dsx::models::ModelShape shape;
  shape.family = dsx::models::ModelShape::Family::Llama;
  auto& c = shape.llama;
  c.vocab_size = tokenizer->vocab_size();
  c.hidden_size = 32, c.intermediate_size = 64, c.num_layers = 2;
  c.num_heads = 4, c.num_kv_heads = 2, c.head_dim = 8, c.max_position_embeddings = 64;
  c.bos_token_id = tokenizer->bos_id().value_or(-1), c.eos_token_id = tokenizer->eos_id().value_or(-1);
  const std::vector<float> weights = dsx::models::initial_parameters(shape, 7);
  dsx::models::HfWriteOptions options;
  options.tokenizer_from = kTokenizer;
  dsx::models::write_llama_hf_folder(dir, c, weights.data(), options);
}

std::string write_text(const dsx::test::TempDir& dir) {
  const std::string path = dir.file("corpus.txt");
  std::ofstream out(path);
  const char* words[] = {"the", "cat", "sat", "on", "a", "warm", "mat", "and", "watched", "birds", "fly", "south"};
  for (int line = 0; line < 200; ++line)
    for (int w = 0; w < 9; ++w) out << words[(line * 7 + w * 5) % 12] << (w == 8 ? ".\n" : " ");
  return path;
}

dsx::test::CommandResult train(const std::string& args) {
  const std::string launch = std::string(DSX_EXE) + " launch --num_gpus 2 --master_port " +
                             std::to_string(dsx::test::free_port()) + " ";
  return run_command("OMP_NUM_THREADS=1 timeout 300 " + launch + DSX_EXE + " train --progress plain " + args);
}

}  // namespace

TEST(LoraCli, TrainsResumesSavesAPeftAdapterAndSamplesWithIt) {
  dsx::test::TempDir dir;
  const std::string model = dir.file("llama");
  write_model_folder(model);
  const std::string base_before = read_all(model + "/model.safetensors");
  const std::string args = " --deepspeed_config " + kZero3 + " --model " + model + " --data text:" + write_text(dir) +
                           " --seq_len 16 --lora r=4,alpha=8,targets=q_proj,v_proj,down_proj";

  auto first = train(args + " --steps 3 --save " + dir.file("out"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("adapter_model.safetensors (PEFT"), std::string::npos) << first.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("out/model.safetensors")));  // the base is not saved again
  EXPECT_EQ(read_all(model + "/model.safetensors"), base_before);
  const std::string config = read_all(dir.file("out/adapter_config.json"));
  EXPECT_NE(config.find("\"peft_type\": \"LORA\""), std::string::npos) << config;
  EXPECT_NE(config.find("\"down_proj\""), std::string::npos) << config;

  auto resumed = train(args + " --steps 6 --load " + dir.file("out") + " --save " + dir.file("out"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("at step 3"), std::string::npos) << resumed.output;
  auto straight = train(args + " --steps 6 --save " + dir.file("straight"));
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  EXPECT_EQ(read_all(dir.file("out/adapter_model.safetensors")), read_all(dir.file("straight/adapter_model.safetensors")));
  // Training moved the adapters: B starts at zeros (PEFT's init) and is not zero any more.
  const dsx::models::SafetensorsReader adapter(dir.file("out/adapter_model.safetensors"));
  const auto* b = adapter.find("base_model.model.model.layers.1.mlp.down_proj.lora_B.weight");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->shape, (std::vector<int64_t>{32, 4}));
  const auto* values = reinterpret_cast<const float*>(b->data);
  EXPECT_TRUE(std::any_of(values, values + b->numel(), [](float x) { return x != 0.0f; }));

  auto s = run_command(std::string(DSX_EXE) + " sample " + model + " --lora-adapter " + dir.file("out") +
                       " --prompt 'the cat' --tokens 4 --temperature 0");
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_EQ(s.output.rfind("the cat", 0), 0u) << s.output;

  // dsx export: the checkpoint's adapter as a PEFT folder (the bytes --save wrote), or merged
  // into the base, whose greedy continuation is the adapted model's.
  auto peft = run_command(std::string(DSX_EXE) + " export " + dir.file("out") + " --peft " + dir.file("peft"));
  ASSERT_EQ(peft.exit_code, 0) << peft.output;
  EXPECT_EQ(read_all(dir.file("peft/adapter_model.safetensors")), read_all(dir.file("out/adapter_model.safetensors")));
  auto plain = run_command(std::string(DSX_EXE) + " export " + dir.file("out") + " --out " + dir.file("full"));
  EXPECT_NE(plain.exit_code, 0);
  EXPECT_NE(plain.output.find("--peft DIR"), std::string::npos) << plain.output;
  auto merged = run_command(std::string(DSX_EXE) + " export " + dir.file("out") + " --out " + dir.file("merged") + " --merged");
  ASSERT_EQ(merged.exit_code, 0) << merged.output;
  auto from_merged = run_command(std::string(DSX_EXE) + " sample " + dir.file("merged") +
                                 " --prompt 'the cat' --tokens 4 --temperature 0");
  ASSERT_EQ(from_merged.exit_code, 0) << from_merged.output;
  EXPECT_EQ(from_merged.output, s.output);

  auto bad = train(args + ",qproj --steps 1");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("target_modules entry 'qproj' matches no module"), std::string::npos) << bad.output;
}

// modules_to_save: lm_head trains in full beside the adapters (ZeRO 3, two ranks); the adapter
// folder holds it under PEFT's name, moved from the base's values, and the merged export carries it.
TEST(LoraCli, ModulesToSaveTrainInFullAndReachBothExports) {
  dsx::test::TempDir dir;
  const std::string model = dir.file("llama");
  write_model_folder(model);
  auto run = train(" --deepspeed_config " + kZero3 + " --model " + model + " --data text:" + write_text(dir) +
                   " --seq_len 16 --lora r=4,targets=q_proj,modules_to_save=lm_head --steps 4 --save " + dir.file("out"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(read_all(dir.file("out/adapter_config.json")).find("\"lm_head\""), std::string::npos);
  const dsx::models::SafetensorsReader adapter(dir.file("out/adapter_model.safetensors"));
  const auto* head = adapter.find("base_model.model.lm_head.weight");
  ASSERT_NE(head, nullptr);
  const dsx::models::LlamaWeights base = dsx::models::read_llama_hf_folder(model);
  const auto& head_spec = dsx::models::llama_param_specs(base.config).back();
  ASSERT_EQ(head_spec.name, "lm_head.weight");
  ASSERT_EQ(head->numel(), head_spec.numel);
  const auto* trained = reinterpret_cast<const float*>(head->data);
  const float* before = base.params.data() + head_spec.offset;
  EXPECT_FALSE(std::equal(trained, trained + head_spec.numel, before));  // it trained

  auto merged = run_command(std::string(DSX_EXE) + " export " + dir.file("out") + " --out " + dir.file("merged") + " --merged");
  ASSERT_EQ(merged.exit_code, 0) << merged.output;
  const dsx::models::LlamaWeights out = dsx::models::read_llama_hf_folder(dir.file("merged"));
  EXPECT_TRUE(std::equal(trained, trained + head_spec.numel, out.params.data() + head_spec.offset));
}

namespace {

// A token shard of a predictable sequence, for a model without a tokenizer.
std::string write_shard(const dsx::test::TempDir& dir, int vocab) {
  std::vector<uint16_t> tokens(2048);
  for (int i = 0; i < 2048; ++i) tokens[i] = static_cast<uint16_t>((i * 7 + i / 5) % vocab);
  return dsx::test::write_token_shard(dir.path(), tokens, vocab);
}

}  // namespace

// GPT-2 from a Hugging Face folder: adapters on its Conv1D projections train at ZeRO 2 on two
// ranks; the adapter folder carries PEFT's names and fan_in_fan_out; export --peft writes the
// same bytes, export --merged refuses (not built for GPT-2), naming what to do.
TEST(LoraCli, Gpt2FolderTrainsAndExportsAPeftAdapter) {
  dsx::test::TempDir dir;
  std::ofstream(dir.file("ds.json")) << R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.01}}, "zero_optimization": {"stage": 2}})";
  const std::string gpt2 = std::string(DSX_SOURCE_DIR) + "/tests/models/data/gpt2";
  auto run = train(" --deepspeed_config " + dir.file("ds.json") + " --model " + gpt2 + " --data shards:" +
                   write_shard(dir, 64) + " --seq_len 8 --lora r=4,targets=c_attn,c_fc --steps 3 --save " +
                   dir.file("out"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string config = read_all(dir.file("out/adapter_config.json"));
  EXPECT_NE(config.find("\"fan_in_fan_out\": true"), std::string::npos) << config;
  const dsx::models::SafetensorsReader adapter(dir.file("out/adapter_model.safetensors"));
  EXPECT_EQ(adapter.tensors().size(), 8u);  // 2 blocks x (c_attn, c_fc) x (A, B)
  const auto* b = adapter.find("base_model.model.transformer.h.1.mlp.c_fc.lora_B.weight");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->shape, (std::vector<int64_t>{128, 4}));
  const auto* values = reinterpret_cast<const float*>(b->data);
  EXPECT_TRUE(std::any_of(values, values + b->numel(), [](float x) { return x != 0.0f; }));

  auto peft = run_command(std::string(DSX_EXE) + " export " + dir.file("out") + " --peft " + dir.file("peft"));
  ASSERT_EQ(peft.exit_code, 0) << peft.output;
  EXPECT_EQ(read_all(dir.file("peft/adapter_model.safetensors")), read_all(dir.file("out/adapter_model.safetensors")));
  auto merged = run_command(std::string(DSX_EXE) + " export " + dir.file("out") + " --out " + dir.file("m") + " --merged");
  EXPECT_NE(merged.exit_code, 0);
  EXPECT_NE(merged.output.find("merge_and_unload"), std::string::npos) << merged.output;
}

// Dropout draws a new mask per training forward: a run saved at step 2 and resumed continues the
// masks where it stopped (from the micro-steps the checkpoint counted), so with lora_dropout on and
// two micro-steps a step it ends on the adapter bytes of an uninterrupted run (GPT-2, ZeRO 2, two
// ranks).
TEST(LoraCli, ResumeWithDropoutDrawsTheUninterruptedRunsMasks) {
  dsx::test::TempDir dir;
  std::ofstream(dir.file("ds.json"))
      << R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.01}}, "zero_optimization": {"stage": 2}})";
  const std::string gpt2 = std::string(DSX_SOURCE_DIR) + "/tests/models/data/gpt2";
  const std::string args = " --deepspeed_config " + dir.file("ds.json") + " --model " + gpt2 +
                           " --data shards:" + write_shard(dir, 64) +
                           " --seq_len 8 --lora r=4,dropout=0.3,targets=all-linear";
  auto first = train(args + " --steps 2 --save " + dir.file("out"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  auto resumed =
      train(args + " --steps 4 --load " + dir.file("out") + " --save " + dir.file("out"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("at step 2"), std::string::npos) << resumed.output;
  auto straight = train(args + " --steps 4 --save " + dir.file("straight"));
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  const std::string adapter = read_all(dir.file("straight/adapter_model.safetensors"));
  ASSERT_FALSE(adapter.empty());
  EXPECT_EQ(read_all(dir.file("out/adapter_model.safetensors")), adapter);
}
