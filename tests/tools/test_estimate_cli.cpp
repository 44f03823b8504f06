// `dsx estimate` as a user runs it: the JSON a script reads, the table, and the errors.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <cstdio>
#include <fstream>

#include "tests/expect_contains.h"
#include "tests/tools/run_command.h"

using dsx::test::run_dsx;

namespace {

rapidjson::Document parse(const std::string& text) {
  rapidjson::Document doc;
  doc.Parse(text.c_str());
  EXPECT_FALSE(doc.HasParseError()) << text;
  return doc;
}

}  // namespace

// Llama-2-7B, 8 GPUs, one node: DeepSpeed 0.19.8's figures
// (tests/tools/test_estimate_deepspeed.cpp).
TEST(EstimateCli, JsonCarriesDeepSpeedFiguresForA7bModel) {
  auto r = run_dsx("estimate --model llama2-7b --gpus-per-node 8 --stage 2,3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto doc = parse(r.output);
  EXPECT_EQ(doc["model"]["params"].GetInt64(), 6738415616);
  const auto& rows = doc["rows"];
  ASSERT_EQ(rows.Size(), 7u);  // 2: none, optimizer; 3: none, optimizer, +param, nvme, nvme+param
  EXPECT_EQ(rows[0]["stage"].GetInt(), 2);
  EXPECT_STREQ(rows[0]["offload_optimizer"].GetString(), "none");
  EXPECT_EQ(rows[0]["gpu"]["model_states"].GetInt64(), 28638266368);
  EXPECT_EQ(rows[0]["cpu_per_node"]["model_states"].GetInt64(), 323443949568);
  EXPECT_EQ(rows[2]["gpu"]["model_states"].GetInt64(), 15685723136);  // stage 3, no offload
  for (const auto& row : rows.GetArray()) {
    const auto& gpu = row["gpu"];
    EXPECT_EQ(gpu["total"].GetInt64(), gpu["model_states"].GetInt64() +
                                           gpu["activations"].GetInt64() +
                                           gpu["buffers"].GetInt64() + gpu["reserve"].GetInt64());
    EXPECT_EQ(row["fits"].GetBool(),
              gpu["total"].GetInt64() <= doc["setup"]["gpu_memory_bytes"].GetInt64());
  }
}

TEST(EstimateCli, TableShowsEveryStageAndOffload) {
  auto r = run_dsx("estimate --model gpt2 --gpu rtx4090 --micro-batch 8");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "124439808 params");
  EXPECT_NE(r.output.find("fewest GPUs"), std::string::npos);
  EXPECT_NE(r.output.find("optimizer+param"), std::string::npos);
  EXPECT_NE(r.output.find("\n0     none"), std::string::npos);
}

TEST(EstimateCli, HfConfigAndRawShapeGiveTheSameCount) {
  const std::string path = std::string(DSX_BINARY_DIR) + "/test_estimate_cli_config.json";
  std::ofstream(path) << R"({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
    "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 32000,
    "max_position_embeddings": 4096, "tie_word_embeddings": false})";
  auto from_file = run_dsx("estimate --hf-config " + path + " --json");
  std::remove(path.c_str());
  auto raw = run_dsx(
      "estimate --layers 32 --hidden 4096 --heads 32 --vocab 32000 --intermediate 11008 "
      "--seq-len 4096 --json");
  ASSERT_EQ(from_file.exit_code, 0) << from_file.output;
  ASSERT_EQ(raw.exit_code, 0) << raw.output;
  EXPECT_EQ(parse(from_file.output)["model"]["params"].GetInt64(), 6738415616);
  EXPECT_EQ(parse(raw.output)["model"]["params"].GetInt64(), 6738415616);
}

TEST(EstimateCli, ParamsOverrideTheCount) {
  auto r = run_dsx(
      "estimate --layers 32 --hidden 4096 --heads 32 --vocab 32000 --seq-len 2048 --params 7e9 "
      "--stage 2 --offload none --gpus-per-node 8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto doc = parse(r.output);
  EXPECT_EQ(doc["model"]["params"].GetInt64(), 7000000000);
  // DeepSpeed: 2P + int(18P/8) = 29750000000 bytes (27.71 GiB, the 7B worked example).
  EXPECT_EQ(doc["rows"][0]["gpu"]["model_states"].GetInt64(), 29750000000);
}

TEST(EstimateCli, BadInputIsAClearUsageError) {
  struct Case {
    const char* args;
    const char* says;
  } cases[] = {
      {"estimate --model gpt5", "known presets: gpt2"},
      {"estimate --model gpt2 --hf-config x.json", "exactly one model"},
      {"estimate --model gpt2 --stage 5", "--stage takes 0, 1, 2 or 3"},
      {"estimate --model gpt2 --offload disk", "--offload takes none, optimizer, param, nvme"},
      {"estimate --model gpt2 --stage 2 --offload nvme", "no valid stage/offload pair"},
      {"estimate --model gpt2 --method dora", "--method takes full, lora or qlora"},
      {"estimate --model gpt2 --method lora --lora-targets q_proj", "use all-linear or some of: c_attn"},
      {"estimate --model gpt2 --method lora --lora-r 0", "--lora-r must be at least 1"},
      {"estimate --model gpt2 --gpu v100", "known types: rtx4090"},
      {"estimate --model gpt2 --micro-batch 0", "--micro-batch must be at least 1"},
      {"estimate --model gpt2 --precision int8", "--precision must be bf16, fp16 or fp32"},
      {"estimate --layers 2 --hidden 64 --heads 4 --vocab 100 --params lots", "--params 'lots'"},
      {"estimate --layers 2 --hidden 64 --heads 4 --vocab 100", "give --seq-len"},
      {"estimate --model gpt2 --stage 0 --offload param", "no valid stage/offload pair"},
  };
  for (const auto& c : cases) {
    auto r = run_dsx(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << c.args << "\n" << r.output;
  }
}

TEST(EstimateCli, AbsurdSizesAreRefusedNotOverflowed) {
  auto r = run_dsx("estimate --layers 2 --hidden 99999999999 --heads 1 --vocab 10 --seq-len 8");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.output, "sizes beyond any real model");
  r = run_dsx(
      "estimate --layers 16384 --hidden 1048576 --heads 16 --vocab 1000 --seq-len 1000000 "
      "--micro-batch 100000");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.output, "more than an exabyte");
}

TEST(EstimateCli, UnreadableOrBrokenConfigNamesTheFile) {
  auto r = run_dsx("estimate --hf-config /nonexistent/config.json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("io error: cannot open '/nonexistent/config.json'"), std::string::npos)
      << r.output;
  const std::string path = std::string(DSX_BINARY_DIR) + "/test_estimate_cli_broken.json";
  std::ofstream(path) << "{\n  \"hidden_size\": 64,\n  \"n_layer\": }\n";
  r = run_dsx("estimate --hf-config " + path);
  std::remove(path.c_str());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("test_estimate_cli_broken.json:3:14: invalid JSON"), std::string::npos)
      << r.output;
}

// --ds-config: the shipped configs/zero3_offload.json (bf16, stage 3, optimizer and parameters on
// the CPU, micro-batch 4) sizes exactly that run.
TEST(EstimateCli, DsConfigDecidesStageOffloadBatchAndPrecision) {
  const std::string config = std::string(DSX_SOURCE_DIR) + "/configs/zero3_offload.json";
  auto r = run_dsx("estimate --model llama2-7b --gpus-per-node 8 --json --ds-config " + config);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto doc = parse(r.output);
  ASSERT_EQ(doc["rows"].Size(), 1u);
  const auto& row = doc["rows"][0];
  EXPECT_EQ(row["stage"].GetInt(), 3);
  EXPECT_STREQ(row["offload_param"].GetString(), "cpu");
  EXPECT_EQ(row["gpu"]["model_states"].GetInt64(), 524288000);  // DeepSpeed: 4 x largest layer
  EXPECT_EQ(doc["setup"]["micro_batch"].GetInt(), 4);
  EXPECT_STREQ(doc["setup"]["precision"].GetString(), "bf16");
  // reduce_bucket_size and stage3_prefetch_bucket_size are 5e7 there: 2 x 5e7 x 2 bytes.
  EXPECT_EQ(row["gpu"]["buffers"].GetInt64(), 200000000);

  // A micro-batch that contradicts the file is the reader's error, as in `dsx config check`.
  auto conflict = run_dsx("estimate --model llama2-7b --micro-batch 2 --ds-config " + config);
  EXPECT_EQ(conflict.exit_code, 1);
  EXPECT_NE(conflict.output.find("the file says 4 but --micro-batch says 2"), std::string::npos)
      << conflict.output;
  auto stage_flag =
      parse(run_dsx("estimate --model llama2-7b --json --stage 2 --ds-config " + config).output);
  EXPECT_EQ(stage_flag["rows"][0]["stage"].GetInt(), 2);  // an explicit --stage wins
}

TEST(EstimateCli, DsConfigOverlapCommDoublesTheBucket) {
  // configs/zero2.json: fp32, stage 2, overlap_comm on, reduce_bucket_size 5e7.
  auto r = run_dsx("estimate --model gpt2 --json --ds-config " + std::string(DSX_SOURCE_DIR) +
                   "/configs/zero2.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto doc = parse(r.output);
  EXPECT_STREQ(doc["setup"]["precision"].GetString(), "fp32");
  EXPECT_EQ(doc["rows"][0]["gpu"]["buffers"].GetInt64(), 2 * 50000000 * 4);
}

// ZeRO-Infinity from a ds_config: stage 3 with the optimizer on NVMe gives the nvme row, whose
// GPU figure is the CPU-offload one; --method adds the adapter rows at the file's stage.
TEST(EstimateCli, DsConfigNvmeAndMethods) {
  const std::string path = std::string(DSX_BINARY_DIR) + "/test_estimate_cli_infinity.json";
  std::ofstream(path) << R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
    "zero_optimization": {"stage": 3, "sub_group_size": 100000000,
                          "offload_optimizer": {"device": "nvme", "nvme_path": "/tmp"}}})";
  auto nvme = run_dsx("estimate --model gpt2 --json --ds-config " + path);
  auto cpu = run_dsx("estimate --model gpt2 --json --stage 3 --offload optimizer");
  auto lora = run_dsx("estimate --model gpt2 --json --method full,lora --ds-config " + path);
  std::remove(path.c_str());
  ASSERT_EQ(nvme.exit_code, 0) << nvme.output;
  auto doc = parse(nvme.output), cpu_doc = parse(cpu.output), lora_doc = parse(lora.output);
  ASSERT_EQ(doc["rows"].Size(), 1u);
  const auto& row = doc["rows"][0];
  EXPECT_STREQ(row["offload_optimizer"].GetString(), "nvme");
  EXPECT_EQ(row["gpu"]["model_states"].GetInt64(),
            cpu_doc["rows"][0]["gpu"]["model_states"].GetInt64());
  EXPECT_EQ(row["nvme_per_node"].GetInt64(), 16 * 124439808LL);
  // One rank's pinned pool: 4 buffers of min(sub_group_size, its partition) fp32 elements.
  EXPECT_EQ(row["cpu_per_node"]["model_states"].GetInt64(), 4LL * 100000000 * 4);
  ASSERT_EQ(lora_doc["rows"].Size(), 2u);
  EXPECT_STREQ(lora_doc["rows"][1]["method"].GetString(), "lora");
  EXPECT_EQ(lora_doc["rows"][1]["stage"].GetInt(), 3);
}

TEST(EstimateCli, DsConfigErrorsNameTheFile) {
  const std::string nvme = std::string(DSX_BINARY_DIR) + "/test_estimate_cli_nvme.json";
  std::ofstream(nvme) << R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
    "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"},
                          "offload_param": {"device": "nvme", "nvme_path": "/tmp"}}})";
  auto r = run_dsx("estimate --model gpt2 --ds-config " + nvme);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.output, "offload_optimizer.device is cpu and offload_param.device is nvme");
  std::ofstream(nvme) << "{\"zero_optimization\": {\"stage\": 7}}";
  r = run_dsx("estimate --model gpt2 --ds-config " + nvme);
  std::remove(nvme.c_str());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.output, "test_estimate_cli_nvme.json");
}

// The names people write: dsx train's GPT-2 presets, "llama-7b", any case and separators, and
// GPUs without their memory size; each gives the same figures as the canonical name.
TEST(EstimateCli, CommonSpellingsNameThePresets) {
  struct Case {
    const char* written;
    const char* canonical;
  } cases[] = {
      {"--model gpt2-124M", "--model gpt2"},
      {"--model gpt2-350M", "--model gpt2-medium"},
      {"--model llama-7b", "--model llama2-7b"},
      {"--model Llama-2-70B", "--model llama2-70b"},
      {"--model llama2-7b --gpu h100", "--model llama2-7b --gpu h100-80gb"},
      {"--model llama2-7b --gpu A100", "--model llama2-7b --gpu a100-40gb"},
  };
  for (const auto& c : cases) {
    auto a = run_dsx(std::string("estimate --json ") + c.written);
    auto b = run_dsx(std::string("estimate --json ") + c.canonical);
    ASSERT_EQ(a.exit_code, 0) << c.written << "\n" << a.output;
    EXPECT_EQ(a.output, b.output) << c.written;
  }
}

// When no cluster fits (stage 0 replicates everything), the table says more GPUs never help,
// with what one GPU would still hold, instead of a bound on the search.
TEST(EstimateCli, AConfigNoClusterFitsSaysWhy) {
  auto r = run_dsx("estimate --model llama2-70b --gpu a100-40gb --stage 0 --offload none");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("none <= 8192"), std::string::npos) << r.output;
  EXPECT_CONTAINS(r.output, "never: >= ");
  EXPECT_CONTAINS(r.output, "GiB per GPU however many");
}

// issue 33, item 16: sizes as people write them, for --params and for --model.
TEST(EstimateCli, SizesAreAcceptedAsWritten) {
  const std::string shape = "estimate --layers 32 --hidden 4096 --heads 32 --vocab 32000 "
                            "--seq-len 2048 --json --params ";
  auto e9 = run_dsx(shape + "7e9");
  ASSERT_EQ(e9.exit_code, 0) << e9.output;
  for (const char* written : {"7B", "7b", "7000M", "7G"}) {
    auto r = run_dsx(shape + written);
    ASSERT_EQ(r.exit_code, 0) << written << "\n" << r.output;
    EXPECT_EQ(r.output, e9.output) << written;
  }
  struct Case {
    const char* model;
    int64_t params;
    const char* like;
  } cases[] = {
      {"7B", 7000000000, "llama2-7b"},
      {"7b", 7000000000, "llama2-7b"},
      {"7e9", 7000000000, "llama2-7b"},
      {"1.3B", 1300000000, "gpt2-xl"},
  };
  for (const auto& c : cases) {
    auto r = run_dsx(std::string("estimate --json --model ") + c.model);
    ASSERT_EQ(r.exit_code, 0) << c.model << "\n" << r.output;
    auto doc = parse(r.output);
    EXPECT_EQ(doc["model"]["params"].GetInt64(), c.params) << c.model;
    EXPECT_NE(std::string(doc["model"]["name"].GetString()).find(c.like), std::string::npos)
        << c.model << "\n" << r.output;
  }
  auto bad = run_dsx("estimate --model 7.5 --json");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_CONTAINS(bad.output, "or a size such as 7B");
}
