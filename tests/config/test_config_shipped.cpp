// Every file in configs/ is a valid config (with the flags its header comment names), and
// `dsx config check` behaves as documented: values with sources, warnings, errors and exit codes,
// --json, --strict.
#include <rapidjson/document.h>

#include <filesystem>
#include <fstream>

#include "tests/config/config_test_util.h"
#include "tests/tools/run_command.h"

using namespace dsx::test;

namespace {

std::string shipped(const std::string& name) { return std::string(DSX_SOURCE_DIR) + "/configs/" + name; }

dsx::config::ConfigInputs flags_for(const std::string& name) {
  dsx::config::ConfigInputs in;
  in.world_size = 2;
  if (name == "hf_auto.json") {
    in.hidden_size = 768;
    in.micro_batch = 4;
    in.grad_accum = 2;
    in.warmup_steps = 100;
  }
  return in;
}

}  // namespace

TEST(ConfigShipped, EveryShippedConfigIsValidWithoutWarnings) {
  const std::vector<std::string> expected = {"zero0.json", "zero1.json", "zero2.json", "zero3.json",
                                             "zero2_offload.json", "zero3_offload.json", "fp16.json",
                                             "bf16.json", "hf_auto.json"};
  size_t found = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(DSX_SOURCE_DIR) + "/configs")) {
    if (entry.path().extension() != ".json") continue;
    const std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    ++found;
    auto in = flags_for(name);
    in.strict = true;  // shipped files must not even warn
    auto c = dsx::config::read_ds_config_file(entry.path().string(), in);
    EXPECT_GT(c.train_batch_size, 0);
    EXPECT_TRUE(c.optimizer.known);
  }
  for (const auto& name : expected) EXPECT_TRUE(std::filesystem::exists(shipped(name))) << name;
  EXPECT_GE(found, expected.size());
}

TEST(ConfigShipped, EachFileIsWhatItsNameSays) {
  auto stage = [](const char* name) {
    return dsx::config::read_ds_config_file(shipped(name), flags_for(name)).zero_optimization.stage;
  };
  EXPECT_EQ(stage("zero0.json"), 0);
  EXPECT_EQ(stage("zero1.json"), 1);
  EXPECT_EQ(stage("zero2.json"), 2);
  EXPECT_EQ(stage("zero3.json"), 3);
  auto o2 = dsx::config::read_ds_config_file(shipped("zero2_offload.json"), flags_for("zero2_offload.json"));
  EXPECT_TRUE(o2.zero_optimization.optimizer_offloaded());
  auto o3 = dsx::config::read_ds_config_file(shipped("zero3_offload.json"), flags_for("zero3_offload.json"));
  EXPECT_TRUE(o3.zero_optimization.optimizer_offloaded() && o3.zero_optimization.params_offloaded());
  EXPECT_TRUE(dsx::config::read_ds_config_file(shipped("fp16.json"), {}).fp16.enabled);
  EXPECT_TRUE(dsx::config::read_ds_config_file(shipped("bf16.json"), {}).bf16.enabled);
  auto hf = dsx::config::read_ds_config_file(shipped("hf_auto.json"), flags_for("hf_auto.json"));
  EXPECT_EQ(hf.train_batch_size, 16);
  EXPECT_EQ(hf.zero_optimization.reduce_bucket_size, 768 * 768);
  EXPECT_EQ(hf.zero_optimization.prefetch_bucket_size, 530841);  // int(0.9 * 768^2)
}

TEST(ConfigCheckCli, QuickstartCommandPrintsValuesAndSources) {
  auto r = run_dsx("config check " + shipped("zero2.json") + " --world-size 2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "valid; data-parallel world size 2");
  EXPECT_CONTAINS(r.output, "train_batch_size");
  EXPECT_CONTAINS(r.output, "16");
  EXPECT_CONTAINS(r.output, "derived (= micro x accumulation x 2)");
  EXPECT_CONTAINS(r.output, "zero_optimization.stage");
  EXPECT_CONTAINS(r.output, "file 18:14");
  EXPECT_CONTAINS(r.output, "default");
}

TEST(ConfigCheckCli, JsonIsOneFlatObject) {
  auto r = run_command(std::string(DSX_EXE) + " config check " + shipped("zero3.json") + " --world-size 4 --json 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  rapidjson::Document d;
  d.Parse(r.output.c_str());
  ASSERT_FALSE(d.HasParseError()) << r.output;
  EXPECT_EQ(d["train_batch_size"].GetInt(), 32);
  EXPECT_EQ(d["zero_optimization.stage"].GetInt(), 3);
  EXPECT_TRUE(d["zero_optimization.overlap_comm"].GetBool());
  EXPECT_EQ(d["zero_optimization.prefetch_bucket_size"].GetInt(), 50000000);
  EXPECT_TRUE(d["zero_optimization.offload_optimizer"].IsNull());
  EXPECT_STREQ(d["optimizer.name"].GetString(), "adamw");
}

TEST(ConfigCheckCli, ErrorsExitOneWithPathAndPosition) {
  auto r = run_dsx("config check " + case_path("s8_10_device_upper"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.output, "config error");
  EXPECT_CONTAINS(r.output, "s8_10_device_upper.json:8:17:");
  EXPECT_CONTAINS(r.output, "zero_optimization.offload_optimizer.device");
}

TEST(ConfigCheckCli, WarningsAndStrict) {
  auto r = run_dsx("config check " + case_path("typo_top_level"));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_CONTAINS(r.output, "Did you mean 'gradient_clipping'?");
  auto s = run_dsx("config check " + case_path("typo_top_level") + " --strict");
  EXPECT_EQ(s.exit_code, 1);
  EXPECT_CONTAINS(s.output, "(an error with --strict)");
}

TEST(ConfigCheckCli, SaysWhatDsxTrainWillNoteAboutTheConfig) {
  const std::string path = (std::filesystem::temp_directory_path() / "dsx_config_notes.json").string();
  {
    std::ofstream out(path);
    out << R"({"train_batch_size": 8, "optimizer": {"type": "AdamW"},
               "zero_optimization": {"stage": 2, "round_robin_gradients": true}})";
  }
  auto r = run_dsx("config check " + path);
  std::filesystem::remove(path);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "notes (dsx train prints them at start):");
  EXPECT_CONTAINS(r.output, "zero_optimization.round_robin_gradients changes nothing in dsx");
}

// Where ZeRO's state lives on CPU ranks and on GPUs, and which backend carries it.
TEST(ConfigCheckCli, SaysWhichArrangementRunsAndWhy) {
  const std::string path = (std::filesystem::temp_directory_path() / "dsx_config_offload.json").string();
  {
    std::ofstream out(path);
    out << R"({"train_batch_size": 8, "optimizer": {"type": "AdamW"},
               "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}})";
  }
  auto r = run_dsx("config check " + path);
  std::filesystem::remove(path);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "on CPU ranks: ZeRO state in host memory");
  EXPECT_CONTAINS(r.output, "on GPUs: ZeRO state in host memory, ZeRO-Offload (offload_optimizer.device cpu)");
  EXPECT_CONTAINS(r.output, "collectives over ofi (the buffers are host memory)");
  // Without offload a GPU run keeps ZeRO in GPU memory and talks over NCCL.
  r = run_dsx("config check " + shipped("zero2.json"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "on GPUs: ZeRO state in GPU memory (no offload in the config); collectives over nccl");
}

TEST(ConfigCheckCli, UsageErrors) {
  EXPECT_EQ(run_dsx("config check").exit_code, 2);
  EXPECT_EQ(run_dsx("config frobnicate").exit_code, 2);
  EXPECT_EQ(run_dsx("config check " + shipped("zero2.json") + " --world-size 0").exit_code, 2);
  EXPECT_EQ(run_dsx("config check /nonexistent.json").exit_code, 1);
  // issue 33, item 22: a directory is called a directory, for the config and for dsx train.
  for (std::string command : {"config check ", "train --deepspeed_config "}) {
    auto d = run_dsx(command + DSX_SOURCE_DIR);
    EXPECT_EQ(d.exit_code, 1) << d.output;
    EXPECT_CONTAINS(d.output, std::string(DSX_SOURCE_DIR) + " is a directory");
  }
  auto h = run_dsx("config check --help");
  EXPECT_EQ(h.exit_code, 0);
  EXPECT_CONTAINS(h.output, "--hidden-size");
  auto top = run_dsx("config --help");  // the verb's options are not hidden one level up
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_CONTAINS(top.output, "--hidden-size");
  EXPECT_CONTAINS(top.output, "--world-size");
}

TEST(ConfigCheckCli, HfAutoNeedsItsFlags) {
  auto r = run_dsx("config check " + shipped("hf_auto.json") + " --world-size 2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.output, "--micro-batch");
  auto ok = run_dsx("config check " + shipped("hf_auto.json") +
                    " --world-size 2 --hidden-size 768 --micro-batch 4 --grad-accum 2 --warmup-steps 100");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_CONTAINS(ok.output, "auto 29:");
}

// issue 33, item 22: a refused batch key gives one error, not a second one saying the batch
// keys are missing.
TEST(ConfigCheckCli, ARefusedBatchSizeIsTheOnlyBatchError) {
  const std::string path = std::string(DSX_BINARY_DIR) + "/test_config_shipped_huge_batch.json";
  std::ofstream(path) << R"({"train_batch_size": 1e30})";
  auto r = run_dsx("config check " + path);
  std::remove(path.c_str());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_CONTAINS(r.output, "too large for a whole number");
  EXPECT_EQ(r.output.find("needs to be provided"), std::string::npos) << r.output;
}
