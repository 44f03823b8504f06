// `dsx autotune` and `dsx launch --autotuning` as users run them: real trial jobs (dsx launch of
// two dsx train ranks on the tiny model) under a memory limit the engine enforces, and the files
// they leave. Every figure the tuner reports is checked against the trials' own metrics files.
#include <gtest/gtest.h>

#include <rapidjson/document.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "engine/observers/profile_metrics.h"
#include "tests/engine/test_files.h"
#include "tests/expect_contains.h"
#include "tests/models/temp_dir.h"
#include "tests/tools/process_table.h"
#include "tests/tools/run_command.h"

using dsx::test::is_usage_error;
using dsx::test::processes_mentioning;
using dsx::test::read_all;
using dsx::test::run_command;

namespace {

constexpr int64_t kLimit = 4'000'000;  // bytes per rank: byte-tiny fits 10-20 samples per rank

std::string write_base_config(const dsx::test::TempDir& dir) {
  const std::string path = dir.file("base.json");
  std::ofstream(path) << R"({
    // what a user starts from: a global batch, an optimizer, no stage
    "train_batch_size": 32,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
    "steps_per_print": 1e9,
    "autotuning": {"start_profile_step": 1, "end_profile_step": 3, "num_tuning_micro_batch_sizes": 2,
                   "results_dir": ")" << dir.file("results") << R"(", "exps_dir": ")" << dir.file("exps") << R"("}
  })";
  return path;
}

dsx::test::CommandResult run_in(const dsx::test::TempDir& dir, const std::string& args) {
  return run_command("cd " + dir.path() + " && OMP_NUM_THREADS=1 timeout 600 " + DSX_EXE + " " + args);
}

rapidjson::Document json_file(const std::string& path) {
  rapidjson::Document d;
  d.Parse(read_all(path).c_str());
  return d;
}

}  // namespace

TEST(AutotuneCli, FindsTheLargestMicroBatchAndTheFastestSplit) {
  dsx::test::TempDir dir;
  const std::string base = write_base_config(dir);
  auto r = run_in(dir, "autotune --device_memory " + std::to_string(kLimit) +
                           " --stages 0,3 --num_gpus 2 dsx train --deepspeed_config " + base + " --model byte-tiny");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string exps = dir.file("exps"), results = dir.file("results");

  // Per stage: the largest micro-batch that fits ran within the limit, one more ran out of memory.
  std::regex row(R"(\| ([03]) \| [0-9.]+ \| [0-9.]+ \| ([0-9]+) \| ([0-9]+) \| ([0-9]+) \|)");
  int stages_seen = 0;
  for (std::sregex_iterator it(r.output.begin(), r.output.end(), row), end; it != end; ++it, ++stages_seen) {
    const std::string stage = (*it)[1];
    const int fits = std::stoi((*it)[3]);
    ASSERT_GT(fits, 1) << r.output;
    const dsx::engine::ProfileMetrics ok = dsx::engine::read_profile_metrics(exps + "/z" + stage + "_mbs" + std::to_string(fits) + "_mem/metrics.json");
    EXPECT_LE(ok.peak_memory_bytes, kLimit);
    EXPECT_EQ(ok.memory_limit_bytes, kLimit);
    const std::string over = exps + "/z" + stage + "_mbs" + std::to_string(fits + 1) + "_mem";
    EXPECT_FALSE(std::filesystem::exists(over + "/metrics.json"));
    EXPECT_NE(read_all(over + "/log.txt").find("out_of_memory error"), std::string::npos) << over;
    EXPECT_LE(std::stoi((*it)[4]), 4) << "the memory model is exact for GPT-2: few probes";
    // Activations grow linearly with the micro-batch: the model's largest is the true largest.
    EXPECT_EQ(std::stoi((*it)[2]), fits);
  }
  EXPECT_EQ(stages_seen, 2) << r.output;

  // The written config is the winning timed trial's, keeps the global batch, and is a valid config.
  // The winner, recomputed from the trials' own metrics files in the order they ran: a split takes
  // the lead only by beating it by more than the noise (the larger spread of the two, at least 2%),
  // so two splits within noise of each other do not make the answer depend on a timing accident.
  dsx::engine::ProfileMetrics best;
  std::string best_name;
  std::regex timed_trial(R"(\[[0-9]+\] (z[0-9]_mbs[0-9]+_gas[0-9]+): ok)");
  int timed = 0;
  for (std::sregex_iterator it(r.output.begin(), r.output.end(), timed_trial), end; it != end; ++it, ++timed) {
    const std::string name = (*it)[1];
    const dsx::engine::ProfileMetrics m = dsx::engine::read_profile_metrics(exps + "/" + name + "/metrics.json");
    EXPECT_EQ(m.profiled_steps, 2);
    EXPECT_NEAR(m.throughput * m.latency, 32, 1e-6) << "samples per step";
    const double noise = std::max({m.latency_spread, best.latency_spread, 0.02});
    if (best_name.empty() || m.throughput > best.throughput * (1 + noise)) best = m, best_name = name;
  }
  EXPECT_GE(timed, 2) << r.output;
  ASSERT_FALSE(best_name.empty());
  EXPECT_CONTAINS(r.output, best_name + " (best)");
  const rapidjson::Document tuned = json_file(results + "/ds_config_optimal.json");
  ASSERT_TRUE(tuned.IsObject());
  const int stage = tuned["zero_optimization"]["stage"].GetInt();
  const int micro = tuned["train_micro_batch_size_per_gpu"].GetInt(), gas = tuned["gradient_accumulation_steps"].GetInt();
  EXPECT_EQ(best_name, "z" + std::to_string(stage) + "_mbs" + std::to_string(micro) + "_gas" + std::to_string(gas));
  EXPECT_EQ(micro * gas * 2, 32);
  EXPECT_EQ(tuned["train_batch_size"].GetInt(), 32);
  EXPECT_DOUBLE_EQ(tuned["optimizer"]["params"]["lr"].GetDouble(), 1e-3) << "the user's keys are kept";
  EXPECT_FALSE(tuned["autotuning"].HasMember("metric_path")) << "the tuned config trains, it is not a trial";
  auto check = run_command(std::string(DSX_EXE) + " config check --world-size 2 " + results + "/ds_config_optimal.json");
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(read_all(results + "/summary.md").find(best_name + " (best)"), std::string::npos);
  // The command as the user can run it: `dsx` where it is on PATH, else the binary's own path
  // (here, a build tree: no dsx on PATH).
  const std::string self = std::filesystem::canonical(DSX_EXE).string();
  const std::string cmd = read_all(results + "/cmd_optimal.txt");
  EXPECT_TRUE(cmd.find(self + " launch --num_gpus 2 " + self + " train --deepspeed_config") != std::string::npos ||
              cmd.find("dsx launch --num_gpus 2 dsx train --deepspeed_config") == 0)
      << cmd;
}

TEST(AutotuneCli, OverwriteFalseReusesFinishedTrials) {
  dsx::test::TempDir dir;
  const std::string base = write_base_config(dir);
  std::string text = read_all(base);
  text.replace(text.find("\"autotuning\": {"), 15, "\"autotuning\": {\"overwrite\": false, ");
  std::ofstream(base) << text;
  const std::string command = "autotune --device_memory 4MB --stages 2 --num_gpus 2 dsx train --deepspeed_config " + base;
  auto first = run_in(dir, command);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(first.output.find("result reused"), std::string::npos) << first.output;
  auto again = run_in(dir, command);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  // Every trial that finished is reused; those that ran out of memory run again.
  const auto count = [](const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(again.output, "result reused"), count(first.output, ": ok,")) << again.output;
  EXPECT_EQ(count(again.output, "out of memory ("), count(first.output, "out of memory (")) << again.output;
  EXPECT_EQ(read_all(dir.file("results/ds_config_optimal.json")).empty(), false);
}

TEST(AutotuneCli, TheDataBoundsTheMicroBatchLikeMemoryDoes) {
  dsx::test::TempDir dir;
  const std::string base = write_base_config(dir);
  // 2 ranks x micro-batch m x 64 positions + 1 token must fit in the file: 2000 bytes allow m <= 15.
  const std::string text = dir.file("small.txt");
  std::ofstream(text) << std::string(2000, 'a');
  auto r = run_in(dir, "autotune --device_memory 1GB --stages 1 --num_gpus 2 dsx train --deepspeed_config " + base +
                           " --model byte-tiny --data text:" + text);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "z1_mbs16_mem: more than the data");
  EXPECT_CONTAINS(r.output, "z1_mbs15_mem: ok");
  EXPECT_NE(r.output.find("| 15 | "), std::string::npos) << "largest that fits: 15\n" << r.output;
  // Timed: the two largest splits of 16 per rank that the data allows.
  EXPECT_CONTAINS(r.output, "| z1_mbs8_gas2");
  EXPECT_CONTAINS(r.output, "| z1_mbs4_gas4");
  EXPECT_EQ(r.output.find("_gas1"), std::string::npos) << r.output;
}

TEST(AutotuneCli, LaunchAutotuningRunTrainsWithTheTunedConfig) {
  dsx::test::TempDir dir;
  const std::string base = write_base_config(dir);
  auto r = run_in(dir, "launch --autotuning run --num_gpus 2 dsx train --deepspeed_config " + base +
                           " --model byte-tiny --steps 6 --samples 0 --device_memory 3500000");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "at most 3.5 MB per rank");
  EXPECT_CONTAINS(r.output, "training with the tuned config");
  EXPECT_CONTAINS(r.output, "training summary");
  EXPECT_CONTAINS(r.output, "steps          6");
  EXPECT_TRUE(std::filesystem::exists(dir.file("results") + "/ds_config_optimal.json"));
}

TEST(AutotuneCli, OutOfMemoryIsAClearErrorWithItsOwnExitCode) {
  dsx::test::TempDir dir;
  const std::string base = write_base_config(dir);
  auto r = run_in(dir, "train --deepspeed_config " + base + " --model byte-tiny --steps 2 --device_memory 1MB");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_CONTAINS(r.output, "out_of_memory error");
  EXPECT_CONTAINS(r.output, "over its 1.00 MB");
  r = run_in(dir, "autotune --device_memory 100KB --stages 3 --num_gpus 2 dsx train --deepspeed_config " + base);
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_CONTAINS(r.output, "no split of the global batch 32 fits");
}

TEST(AutotuneCli, BadCommandsAreRefusedBeforeAnyTrial) {
  dsx::test::TempDir dir;
  const std::string base = write_base_config(dir);
  EXPECT_TRUE(is_usage_error(run_in(dir, "autotune --num_gpus 2 python train.py --deepspeed ds.json"),
                             "tunes a `dsx train` job"));
  EXPECT_TRUE(is_usage_error(run_in(dir, "autotune --stages 5 --num_gpus 2 dsx train --deepspeed_config " + base),
                             "--stages '5'"));
  EXPECT_TRUE(is_usage_error(run_in(dir, "autotune --device_memory lots dsx train --deepspeed_config " + base),
                             "'lots' is not a size"));
  // issue 33, item 18: autotune's own flags are its own after a launch flag too.
  EXPECT_TRUE(is_usage_error(
      run_in(dir, "autotune --num_gpus 1 --device_memory lots dsx train --deepspeed_config " + base),
      "'lots' is not a size"));
  EXPECT_TRUE(is_usage_error(
      run_in(dir, "autotune --num_gpus=1 --trial_timeout=never dsx train --deepspeed_config " + base),
      "--trial_timeout 'never' is not a number"));
  EXPECT_TRUE(is_usage_error(run_in(dir, "launch --autotuning sometimes dsx train --deepspeed_config " + base),
                             "choose tune"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("exps")));
}

TEST(AutotuneCli, AHangingTrialIsStoppedAtItsTimeoutWithNothingLeftRunning) {
  dsx::test::TempDir dir;
  const std::string base = write_base_config(dir);
  // Reading a FIFO nobody writes blocks forever: every rank of the trial hangs at start-up.
  const std::string fifo = dir.file("never-written.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  auto r = run_in(dir, "autotune --trial_timeout 3 --device_memory 4MB --stages 0 --num_gpus 2 dsx train "
                       "--deepspeed_config " + base + " --data text:" + fifo);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_CONTAINS(r.output, "trial z0_mbs1_mem timed out");
  EXPECT_CONTAINS(r.output, "stopped after 3 s (--trial_timeout)");
  EXPECT_LT(seconds, 60) << "stopped promptly";
  EXPECT_TRUE(processes_mentioning(fifo).empty()) << "a rank of the stopped trial is still running";
}

TEST(AutotuneCli, AProfiledTrainRunWritesDeepSpeedsMetrics) {
  dsx::test::TempDir dir;
  const std::string path = dir.file("trial.json");
  std::ofstream(path) << R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}, "zero_optimization": {"stage": 2},
    "autotuning": {"enabled": true, "metric_path": ")" << dir.file("m/metrics.json") << R"(",
                   "start_profile_step": 2, "end_profile_step": 5}})";
  auto r = run_in(dir, "launch --num_gpus 2 --master_port 0 " + std::string(DSX_EXE) + " train --deepspeed_config " + path +
                           " --model byte-tiny --steps 100 --progress plain --samples 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("step 5/5"), std::string::npos) << "end_profile_step ends the run: " << r.output;
  const rapidjson::Document m = json_file(dir.file("m/metrics.json"));
  ASSERT_TRUE(m.IsObject());
  for (const char* key : {"latency", "throughput", "FLOPS_per_gpu"}) EXPECT_GT(m[key].GetDouble(), 0) << key;
  EXPECT_EQ(m["profiled_steps"].GetInt(), 3);
  EXPECT_NEAR(m["throughput"].GetDouble() * m["latency"].GetDouble(), 16, 1e-6) << "4 x 2 x 2 samples per step";
  EXPECT_GT(m["peak_memory_bytes"].GetInt64(), m["activation_bytes"].GetInt64());
  std::ofstream(path) << R"({"train_batch_size": 8, "autotuning": {"enabled": true, "start_profile_step": 5,
                             "end_profile_step": 5}})";
  r = run_in(dir, "config check " + path);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_CONTAINS(r.output, "end_profile_step (5) must be above start_profile_step (5)");
}
