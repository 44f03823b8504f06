// `dsx train` as users run it: real ranks started by `dsx launch`, a ds_config, the addition task.
// Training learns, checkpoints resume bit-exactly, and damaged or mismatched checkpoints are
// refused with a message naming the file.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <regex>
#include <thread>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "tests/comm/free_port.h"
#include "tests/models/temp_dir.h"
#include "tests/tools/process_table.h"
#include "tests/tools/run_command.h"
#include "tests/engine/test_files.h"

using dsx::test::read_all;

namespace {

using dsx::test::run_command;

std::string config_file(const dsx::test::TempDir& dir, int stage) {
  const std::string path = dir.file("ds_config.json");
  std::ofstream(path) << R"({
    "train_micro_batch_size_per_gpu": 8,
    "gradient_accumulation_steps": 2,
    "steps_per_print": 5,
    "optimizer": {"type": "AdamW", "params": {"lr": 2e-3, "weight_decay": 0.01}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 5, "warmup_type": "linear"}},
    "zero_optimization": {"stage": )" << stage << R"(, "overlap_comm": true, "reduce_bucket_size": 20000}
  })";
  return path;
}

// dsx launch of `ranks` ranks of dsx train with `args`.
dsx::test::CommandResult train(int ranks, const std::string& args) {
  const std::string launch = std::string(DSX_EXE) + " launch --num_gpus " + std::to_string(ranks) +
                             " --master_port " + std::to_string(dsx::test::free_port()) + " ";
  return run_command("OMP_NUM_THREADS=1 timeout 300 " + launch + DSX_EXE + " train --progress plain --samples 0 " + args);
}

TEST(TrainCli, TwoRanksTrainLogAndSave) {
  dsx::test::TempDir dir;
  auto r = train(2, "--deepspeed_config " + config_file(dir, 2) + " --steps 20 --eval_interval 10 --save " + dir.file("ck"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("2 rank(s)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ZeRO stage 2 with overlap_comm"), std::string::npos);
  EXPECT_NE(r.output.find("arrangement: ZeRO state in host memory (the model computes on the CPU); collectives "
                          "over ofi"), std::string::npos) << "where ZeRO's state lives and why";
  EXPECT_NE(r.output.find("ZeRO holds on rank 0 (cpu): params "), std::string::npos) << "its bytes, by kind";
  EXPECT_NE(r.output.find("step=10, skipped=0"), std::string::npos) << "DeepSpeed's progress line";
  EXPECT_NE(r.output.find("held-out accuracy"), std::string::npos);
  EXPECT_NE(r.output.find("training summary"), std::string::npos);
  // the loss falls: from about ln(256) = 5.5 to below 4 in 20 steps
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex(R"(loss\s+([0-9.]+) first, ([0-9.]+) final)"))) << r.output;
  EXPECT_GT(std::stod(m[1]), 5.0);
  EXPECT_LT(std::stod(m[2]), 4.0);
  EXPECT_EQ(read_all(dir.file("ck/latest")), "global_step20");
  for (const char* f : {"mp_rank_00_model_states.safetensors", "zero_pp_rank_0_mp_rank_00_optim_states.safetensors",
                        "zero_pp_rank_1_mp_rank_00_optim_states.safetensors", "manifest.json"}) {
    EXPECT_TRUE(std::filesystem::exists(dir.file(std::string("ck/global_step20/") + f))) << f;
  }
  // The weights file loads in `dsx sample`.
  auto s = run_command(std::string(DSX_EXE) + " sample --weights " + dir.file("ck/model.safetensors") + " --add 12+34");
  EXPECT_EQ(s.exit_code, 0) << s.output;
  // dsx export (zero_to_fp32): the consolidated fp32 file is the trained model exactly; bf16 loads too.
  auto e = run_command(std::string(DSX_EXE) + " export " + dir.file("ck") + " --out " + dir.file("export/fp32.safetensors"));
  ASSERT_EQ(e.exit_code, 0) << e.output;
  EXPECT_TRUE(read_all(dir.file("export/fp32.safetensors")) == read_all(dir.file("ck/model.safetensors")));
  auto b = run_command(std::string(DSX_EXE) + " export " + dir.file("ck") + " --dtype bf16 --out " +
                       dir.file("export16/bf16.safetensors"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  auto sb = run_command(std::string(DSX_EXE) + " sample --weights " + dir.file("export16/bf16.safetensors") + " --add 12+34");
  EXPECT_EQ(sb.exit_code, 0) << sb.output;
}

TEST(TrainCli, MonitorsProfilerAndCommsLoggerReport) {
  dsx::test::TempDir dir;
  const std::string config = dir.file("monitored.json");
  std::ofstream(config) << R"({"train_batch_size": 16, "optimizer": {"type": "Adam"}, "fp16": {"enabled": true},
    "csv_monitor": {"enabled": true, "output_path": ")" << dir.file("logs") << R"(", "job_name": "job"},
    "tensorboard": {"enabled": true, "output_path": ")" << dir.file("logs") << R"(", "job_name": "job"},
    "flops_profiler": {"enabled": true, "profile_step": 2, "output_file": ")" << dir.file("flops.txt") << R"("},
    "comms_logger": {"enabled": true}})";
  auto r = train(2, "--deepspeed_config " + config + " --steps 5 --eval_interval 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string loss = read_all(dir.file("logs/job/Train_Samples_train_loss.csv"));
  // a header and one row per step, the step counted in samples (16 per step)
  EXPECT_EQ(std::count(loss.begin(), loss.end(), '\n'), 6) << loss;
  EXPECT_NE(loss.find("80,"), std::string::npos) << loss;
  EXPECT_FALSE(read_all(dir.file("logs/job/Train_Samples_loss_scale.csv")).empty()) << "fp16 logs its loss scale";
  bool events = false;
  for (const auto& f : std::filesystem::directory_iterator(dir.file("logs/job"))) {
    events |= f.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
  }
  EXPECT_TRUE(events) << "no TensorBoard event file";
  const std::string flops = read_all(dir.file("flops.txt"));
  EXPECT_NE(flops.find("Profile Summary at step 2"), std::string::npos) << flops;
  EXPECT_NE(flops.find("MFU"), std::string::npos) << flops;
  // comms_logger: DeepSpeed's table with the gradient allreduces (fp16 grads travel in fp16)
  EXPECT_NE(r.output.find("Comm. Op"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("all_reduce"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("busbw_avg (Gbps)"), std::string::npos) << r.output;
}

// The activation_checkpointing block makes backward recompute each layer's activations: less
// memory held (the ledger's activations), the same arithmetic, so the same weights bit for bit.
TEST(TrainCli, ActivationCheckpointingKeepsTheWeightsAndHoldsLess) {
  dsx::test::TempDir dir;
  const std::string plain = config_file(dir, 2);
  std::string text = read_all(plain);
  const std::string checkpointed = dir.file("checkpointed.json");
  std::ofstream(checkpointed) << text.substr(0, text.rfind('}')) << R"(, "activation_checkpointing": {}})";
  auto a = train(2, "--deepspeed_config " + plain + " --steps 4 --eval_interval 0 --save " + dir.file("a"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto b = train(2, "--deepspeed_config " + checkpointed + " --steps 4 --eval_interval 0 --save " + dir.file("b"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const std::string weights = read_all(dir.file("a/model.safetensors"));
  ASSERT_FALSE(weights.empty());
  EXPECT_TRUE(weights == read_all(dir.file("b/model.safetensors"))) << "recomputation changed the result";
  auto activations = [](const std::string& out) {
    std::smatch m;
    return std::regex_search(out, m, std::regex(R"(activations ([\d.e+-]+) MB)")) ? std::stod(m[1]) : -1.0;
  };
  EXPECT_GT(activations(a.output), 0) << a.output;
  EXPECT_LT(activations(b.output), 0.7 * activations(a.output)) << b.output;
}

TEST(TrainCli, BreakdownsSayWhereTimeAndMemoryGo) {
  dsx::test::TempDir dir;
  const std::string config = dir.file("breakdown.json");
  std::ofstream(config) << R"({"train_batch_size": 16, "steps_per_print": 3, "wall_clock_breakdown": true,
    "memory_breakdown": true, "optimizer": {"type": "Adam"}, "zero_optimization": {"stage": 2}})";
  auto r = train(2, "--deepspeed_config " + config + " --steps 3 --eval_interval 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex(R"(time \(ms\) \| fwd: ([\d.]+) \| bwd: ([\d.]+) \| step: ([\d.]+) \| comm wait: ([\d.]+) \| comm hidden behind backward: ([\d.]+)%)")))
      << r.output;
  EXPECT_GT(std::stod(m[1]), 0);
  EXPECT_GT(std::stod(m[2]), 0);
  EXPECT_LE(std::stod(m[4]), std::stod(m[2])) << "the wait is part of backward";
  EXPECT_NE(r.output.find("memory (rank 0): params"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("activations"), std::string::npos) << r.output;
}

class TrainResume : public ::testing::TestWithParam<int> {};

TEST_P(TrainResume, ResumingGivesTheSameWeightsBitForBit) {
  dsx::test::TempDir dir;
  const std::string config = "--deepspeed_config " + config_file(dir, GetParam()) + " --eval_interval 0 ";
  auto straight = train(2, config + "--steps 12 --save " + dir.file("a"));
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  auto first = train(2, config + "--steps 6 --save " + dir.file("b"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  auto resumed = train(2, config + "--steps 12 --load " + dir.file("b") + " --save " + dir.file("c"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from"), std::string::npos);
  const std::string a = read_all(dir.file("a/model.safetensors"));
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == read_all(dir.file("c/model.safetensors"))) << "weights differ after resume";
}

INSTANTIATE_TEST_SUITE_P(Stages, TrainResume, ::testing::Values(1, 3));

// DeepSpeed's stage-3 layout: no mp_rank_00_model_states file; every rank writes
// zero_pp_rank_<r>_mp_rank_00_model_states beside its optim_states (rank 0's also holds the full
// model, dsx's addition, so that export needs one file). Export reads it; resume is TrainResume/3.
TEST(TrainCli, StageThreeCheckpointHasDeepSpeedsPerRankModelStates) {
  dsx::test::TempDir dir;
  const std::string ck = dir.file("ck");
  ASSERT_EQ(train(2, "--deepspeed_config " + config_file(dir, 3) + " --eval_interval 0 --steps 2 --save " + ck).exit_code, 0);
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(ck + "/global_step2")) names.insert(entry.path().filename());
  EXPECT_EQ(names, (std::set<std::string>{"manifest.json", "zero_pp_rank_0_mp_rank_00_model_states.safetensors",
                                          "zero_pp_rank_1_mp_rank_00_model_states.safetensors",
                                          "zero_pp_rank_0_mp_rank_00_optim_states.safetensors",
                                          "zero_pp_rank_1_mp_rank_00_optim_states.safetensors"}));
  auto e = run_command(std::string(DSX_EXE) + " export " + ck + " --out " + dir.file("export/fp32.safetensors"));
  ASSERT_EQ(e.exit_code, 0) << e.output;
  EXPECT_TRUE(read_all(dir.file("export/fp32.safetensors")) == read_all(ck + "/model.safetensors"));
}

TEST(TrainCli, TruncatedCheckpointIsRefusedNamingTheFile) {
  dsx::test::TempDir dir;
  const std::string config = "--deepspeed_config " + config_file(dir, 2) + " --eval_interval 0 ";
  ASSERT_EQ(train(2, config + "--steps 4 --save " + dir.file("ck")).exit_code, 0);
  const std::string victim = dir.file("ck/global_step4/zero_pp_rank_1_mp_rank_00_optim_states.safetensors");
  std::filesystem::resize_file(victim, std::filesystem::file_size(victim) / 2);
  auto r = train(2, config + "--steps 8 --load " + dir.file("ck"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("zero_pp_rank_1_mp_rank_00_optim_states.safetensors"), std::string::npos) << r.output;
}

// The partition is copied into the optimizer in the pass that checksums it: a flipped bit in it
// still stops the resume, naming the file.
TEST(TrainCli, FlippedBitInAPartitionIsRefusedNamingTheFile) {
  dsx::test::TempDir dir;
  const std::string config = "--deepspeed_config " + config_file(dir, 2) + " --eval_interval 0 ";
  ASSERT_EQ(train(2, config + "--steps 4 --save " + dir.file("ck")).exit_code, 0);
  const std::string victim = dir.file("ck/global_step4/zero_pp_rank_1_mp_rank_00_optim_states.safetensors");
  std::fstream file(victim, std::ios::in | std::ios::out | std::ios::binary);
  const auto middle = static_cast<std::streamoff>(std::filesystem::file_size(victim) * 3 / 4);  // tensor bytes
  file.seekg(middle);
  const char byte = static_cast<char>(file.get() ^ 0x10);
  file.seekp(middle);
  file.put(byte);
  file.close();
  auto r = train(2, config + "--steps 8 --load " + dir.file("ck"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("zero_pp_rank_1_mp_rank_00_optim_states.safetensors is corrupt"), std::string::npos)
      << r.output;
}

// DeepSpeed's universal checkpoint: a checkpoint saved by 2 ranks at stage 3 loads on 3 ranks at
// stage 1 with the same weights, and the optimizer state survives the re-cut: going 2 -> 3 -> 2
// and training on gives bit for bit what training on from the first checkpoint gives.
TEST(TrainCli, ReloadOnAnotherWorldSizeAndStageKeepsEveryState) {
  dsx::test::TempDir dir;
  config_file(dir, 3);
  std::filesystem::rename(dir.file("ds_config.json"), dir.file("s3.json"));
  const std::string stage1 = "--deepspeed_config " + config_file(dir, 1) + " --eval_interval 0 ";
  const std::string two = "--deepspeed_config " + dir.file("s3.json") + " --eval_interval 0 ";
  ASSERT_EQ(train(2, two + "--steps 6 --save " + dir.file("a")).exit_code, 0);
  auto recut = train(3, stage1 + "--steps 6 --load " + dir.file("a") + " --save " + dir.file("b"));
  ASSERT_EQ(recut.exit_code, 0) << recut.output;
  EXPECT_TRUE(read_all(dir.file("a/model.safetensors")) == read_all(dir.file("b/model.safetensors")))
      << "weights changed when 3 ranks at stage 1 loaded a 2-rank stage-3 checkpoint";
  auto back = train(2, two + "--steps 10 --load " + dir.file("b") + " --save " + dir.file("c"));
  ASSERT_EQ(back.exit_code, 0) << back.output;
  auto direct = train(2, two + "--steps 10 --load " + dir.file("a") + " --save " + dir.file("d"));
  ASSERT_EQ(direct.exit_code, 0) << direct.output;
  EXPECT_TRUE(read_all(dir.file("c/model.safetensors")) == read_all(dir.file("d/model.safetensors")))
      << "optimizer state or counters were lost in the 2 -> 3 -> 2 re-cut";
}

// A save records its data width (world x micro-batch): at another micro-batch the addition task
// continues with the next example; shuffled text cannot, and says so rather than repeat samples.
TEST(TrainCli, ResumeAtAnotherDataWidthContinuesOrSaysWhyNot) {
  dsx::test::TempDir dir;
  const auto config = [&](int micro) {
    const std::string path = dir.file("micro" + std::to_string(micro) + ".json");
    std::ofstream(path) << R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": )" << micro
                        << R"(, "optimizer": {"type": "AdamW"}})";
    return "--deepspeed_config " + path + " --eval_interval 0 ";
  };
  std::ofstream text(dir.file("text.txt"));
  for (int i = 0; i < 2000; ++i) text << "line " << i << " of a small text to train on\n";
  text.close();
  const std::string data = "--data text:" + dir.file("text.txt") + " ";
  ASSERT_EQ(train(1, config(2) + "--steps 2 --save " + dir.file("a")).exit_code, 0);
  auto addition = train(1, config(4) + "--steps 3 --load " + dir.file("a"));
  EXPECT_EQ(addition.exit_code, 0) << addition.output;
  EXPECT_NE(addition.output.find("resumed from"), std::string::npos) << addition.output;
  auto first = train(1, config(2) + data + "--steps 2 --save " + dir.file("t"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  auto refused = train(1, config(4) + data + "--steps 3 --load " + dir.file("t"));
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.output.find("saved by a run reading 2 rows per micro-step (world x "
                                "micro-batch); this run reads 4"),
            std::string::npos)
      << refused.output;
}

TEST(TrainCli, CheckpointOfAnotherModelIsRefused) {
  dsx::test::TempDir dir;
  const std::string config = "--deepspeed_config " + config_file(dir, 1) + " --eval_interval 0 ";
  ASSERT_EQ(train(2, config + "--steps 2 --save " + dir.file("ck")).exit_code, 0);
  auto r = train(1, config + "--model byte-small --data text:" + std::string(DSX_SOURCE_DIR) + "/README.md --steps 4 --load " + dir.file("ck"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("Use the same --model"), std::string::npos) << r.output;
}

// A 2-rank job (dsx launch) killed at random moments while it saves every step: the launcher
// gets SIGKILL, its ranks die with it (the kernel's parent-death signal), and after every kill the
// checkpoint directory verifies and the next job resumes from it.
TEST(TrainCli, KilledWhileSavingNeverBreaksLatest) {
  dsx::test::TempDir dir;
  const std::string config = config_file(dir, 2);
  const std::string save = dir.file("ck");
  std::mt19937 rng(7);
  int verified = 0;
  for (int round = 0; round < 6; ++round) {
    const std::string port = std::to_string(dsx::test::free_port());
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 1);
      ::execl(DSX_EXE, DSX_EXE, "launch", "--num_gpus", "2", "--master_port", port.c_str(), DSX_EXE, "train",
              "--deepspeed_config", config.c_str(), "--steps", "100000", "--save", save.c_str(), "--save_interval", "1",
              "--eval_interval", "0", "--progress", "plain", round == 0 ? nullptr : "--load", save.c_str(), nullptr);
      ::_exit(127);
    }
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(800, 2500)(rng)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "round " << round << ": the job ended by itself, status " << status;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the ranks follow their launcher
    if (!std::filesystem::exists(save + "/latest")) continue;     // killed before the first save
    auto v = run_command(std::string(DSX_EXE) + " checkpoint verify " + save);
    ASSERT_EQ(v.exit_code, 0) << "round " << round << ": " << v.output;
    ++verified;
  }
  EXPECT_GE(verified, 3);
  // Round 0 may be killed before its first save: the next round's --load then starts from
  // scratch, as DeepSpeed does, instead of failing.
  auto r = train(2, "--deepspeed_config " + config + " --steps 1 --eval_interval 0 --load " + save);
  // --steps 1 is already reached: the job loads, trains nothing and exits cleanly
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
}

// No rank outlives its launcher, whatever it is doing when the launcher dies: killed at many
// moments of start-up (inside libfabric's set-up too, where a SIGTERM handler once deadlocked),
// the ranks are gone within seconds.
TEST(TrainCli, RanksNeverOutliveAKilledLauncher) {
  dsx::test::TempDir dir;
  const std::string config = config_file(dir, 2);
  for (int delay_ms : {50, 150, 250, 350, 450, 550, 700, 900, 1200}) {
    const std::string save = dir.file("orphan-check-" + std::to_string(delay_ms));
    const std::string port = std::to_string(dsx::test::free_port());
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 1), ::dup2(null, 2);
      ::execl(DSX_EXE, DSX_EXE, "launch", "--num_gpus", "2", "--master_port", port.c_str(), DSX_EXE, "train",
              "--deepspeed_config", config.c_str(), "--steps", "100000", "--save", save.c_str(), "--progress", "plain",
              nullptr);
      ::_exit(127);
    }
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    std::vector<pid_t> left = dsx::test::processes_mentioning(save);
    for (int i = 0; i < 100 && !left.empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      left = dsx::test::processes_mentioning(save);
    }
    EXPECT_TRUE(left.empty()) << left.size() << " rank(s) outlived a launcher killed after " << delay_ms << " ms";
    for (pid_t p : left) ::kill(p, SIGKILL);  // clean up what the failure left
  }
}

TEST(TrainCli, LoadFromADirectoryWithNoSaveYetStartsFromScratch) {
  dsx::test::TempDir dir;
  const std::string config = "--deepspeed_config " + config_file(dir, 2) + " --eval_interval 0 ";
  auto fresh = train(2, config + "--steps 3 --load " + dir.file("ck") + " --save " + dir.file("ck"));
  ASSERT_EQ(fresh.exit_code, 0) << fresh.output;
  EXPECT_NE(fresh.output.find("no checkpoint in " + dir.file("ck") + " yet"), std::string::npos) << fresh.output;
  auto resumed = train(2, config + "--steps 5 --load " + dir.file("ck") + " --save " + dir.file("ck"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from " + dir.file("ck") + "/global_step3 at step 3"), std::string::npos)
      << resumed.output;
  // A tag named explicitly must exist.
  auto tagged = train(2, config + "--steps 5 --load " + dir.file("ck") + " --tag global_step99");
  EXPECT_NE(tagged.exit_code, 0);
  EXPECT_NE(tagged.output.find("global_step99"), std::string::npos) << tagged.output;
}

// A lost or emptied `latest` never makes a run start from scratch and overwrite the step folders
// beside it: the run resumes from the newest folder whose files all verify and says so, and
// `dsx checkpoint verify` names the same folder. When none verifies, both refuse, naming them.
TEST(TrainCli, EmptyOrMissingLatestResumesFromTheNewestStepThatVerifies) {
  dsx::test::TempDir dir;
  const std::string config = "--deepspeed_config " + config_file(dir, 2) + " --eval_interval 0 ";
  const std::string ck = dir.file("ck");
  ASSERT_EQ(train(2, config + "--steps 4 --save_interval 2 --save " + ck).exit_code, 0);
  const std::string step4 = ck + "/global_step4/zero_pp_rank_1_mp_rank_00_optim_states.safetensors";
  const std::string saved4 = read_all(step4);

  std::ofstream(ck + "/latest", std::ios::trunc);  // empty
  auto verify = dsx::test::run_dsx("checkpoint verify " + ck);
  EXPECT_EQ(verify.exit_code, 0) << verify.output;
  EXPECT_NE(verify.output.find(ck + "/latest is empty; a load takes " + ck + "/global_step4"), std::string::npos)
      << verify.output;
  auto resumed = train(2, config + "--steps 6 --load " + ck + " --save " + ck);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find(ck + "/latest is empty; a load takes " + ck + "/global_step4"), std::string::npos)
      << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from " + ck + "/global_step4 at step 4"), std::string::npos) << resumed.output;
  EXPECT_TRUE(read_all(step4) == saved4) << "global_step4 was overwritten";

  // No `latest` at all, and the newest folder damaged: the one before it, and the damage named.
  std::filesystem::remove(ck + "/latest");
  const std::string victim = ck + "/global_step6/zero_pp_rank_0_mp_rank_00_optim_states.safetensors";
  std::filesystem::resize_file(victim, std::filesystem::file_size(victim) / 2);
  verify = dsx::test::run_dsx("checkpoint verify " + ck);
  EXPECT_EQ(verify.exit_code, 0) << verify.output;
  EXPECT_NE(verify.output.find("there is no " + ck + "/latest; a load takes " + ck + "/global_step4"),
            std::string::npos) << verify.output;
  EXPECT_NE(verify.output.find("global_step6 (checkpoint file " + victim + " is truncated"), std::string::npos)
      << verify.output;
  resumed = train(2, config + "--steps 5 --load " + ck);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from " + ck + "/global_step4 at step 4"), std::string::npos) << resumed.output;

  // Nothing verifies: both refuse, naming every folder, and train writes nothing.
  for (const char* tag : {"global_step2", "global_step4"}) {
    const std::string f = ck + "/" + tag + "/mp_rank_00_model_states.safetensors";
    std::filesystem::resize_file(f, std::filesystem::file_size(f) - 1);
  }
  verify = dsx::test::run_dsx("checkpoint verify " + ck);
  EXPECT_EQ(verify.exit_code, 1) << verify.output;
  auto refused = train(2, config + "--steps 8 --load " + ck + " --save " + ck);
  EXPECT_NE(refused.exit_code, 0) << refused.output;
  for (const auto* r : {&verify, &refused}) {
    for (const char* tag : {"global_step2 (", "global_step4 (", "global_step6 ("})
      EXPECT_NE(r->output.find(tag), std::string::npos) << r->output;
    EXPECT_NE(r->output.find("no checkpoint folder in " + ck + " verifies"), std::string::npos) << r->output;
  }
  EXPECT_FALSE(std::filesystem::exists(ck + "/global_step8"));
  EXPECT_FALSE(std::filesystem::exists(ck + "/latest"));
}

// Whether the run resumed or starts from scratch is said before training starts, also when the
// output goes to a file (fully buffered): a log read while the run is alive, or after it was
// killed, holds the line.
TEST(TrainCli, ResumeMessagesReachAFileBeforeTrainingEnds) {
  dsx::test::TempDir dir;
  const std::string config = config_file(dir, 2);
  const std::string ck = dir.file("ck");
  auto saved = train(1, "--deepspeed_config " + config + " --eval_interval 0 --steps 2 --save " + ck);
  ASSERT_EQ(saved.exit_code, 0) << saved.output;
  struct Case {
    std::string load, expected;
  };
  for (const Case& c : {Case{dir.file("empty"), "no checkpoint in " + dir.file("empty") + " yet"},
                        Case{ck, "resumed from " + ck + "/global_step2 at step 2"}}) {
    const std::string log = dir.file("train.log");
    pid_t pid = ::fork();
    if (pid == 0) {
      const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(out, 1), ::dup2(null, 2);
      ::setenv("OMP_NUM_THREADS", "1", 1);
      ::execl(DSX_EXE, DSX_EXE, "train", "--deepspeed_config", config.c_str(), "--steps", "1000000",
              "--eval_interval", "0", "--samples", "0", "--progress", "plain", "--load", c.load.c_str(), nullptr);
      ::_exit(127);
    }
    ASSERT_GT(pid, 0);
    bool said = false, alive = true;
    for (int i = 0; i < 600 && !said && alive; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      said = read_all(log).find(c.expected) != std::string::npos;
      alive = ::waitpid(pid, nullptr, WNOHANG) == 0;
    }
    if (alive) ::kill(pid, SIGKILL), ::waitpid(pid, nullptr, 0);
    EXPECT_TRUE(said) << "'" << c.expected << "' not in the log of a running train (alive: " << alive
                      << "):\n" << read_all(log);
  }
}

// --steps counts optimizer steps from step 0, as DeepSpeed's global step does. A resume at or
// beyond --steps says it has nothing to train and saves nothing again into the directory it
// loaded from; beyond --steps (--steps 25 meant as "25 more") it also names the --steps that
// trains that many more. (Into another --save it writes the copy that
// ReloadOnAnotherWorldSizeAndStageKeepsEveryState re-cuts with.)
TEST(TrainCli, ResumingAtOrBeyondStepsIsSaidNotSilentlySavedAgain) {
  dsx::test::TempDir dir;
  const std::string config = "--deepspeed_config " + config_file(dir, 2) + " --eval_interval 0 ";
  const std::string ck = dir.file("ck");
  ASSERT_EQ(train(2, config + "--steps 4 --save " + ck).exit_code, 0);
  const auto saved_at = std::filesystem::last_write_time(ck + "/global_step4");

  auto done = train(2, config + "--steps 4 --load " + ck + " --save " + ck);
  ASSERT_EQ(done.exit_code, 0) << done.output;
  EXPECT_NE(done.output.find("resumed from " + ck + "/global_step4 at step 4, the last of --steps 4: nothing to "
                             "train, no new checkpoint"), std::string::npos) << done.output;
  EXPECT_EQ(done.output.find("saved checkpoint"), std::string::npos) << done.output;
  EXPECT_TRUE(std::filesystem::last_write_time(ck + "/global_step4") == saved_at) << "global_step4 was saved again";

  auto fewer = train(2, config + "--steps 3 --load " + ck + " --save " + ck);
  EXPECT_EQ(fewer.exit_code, 0) << fewer.output;
  EXPECT_NE(fewer.output.find("resumed from " + ck + "/global_step4 at step 4, beyond --steps 3: nothing to train, "
                              "no new checkpoint (--steps counts optimizer steps from step 0, not from the resume: "
                              "to train 3 more steps, pass --steps 7)"), std::string::npos) << fewer.output;
  EXPECT_EQ(fewer.output.find("saved checkpoint"), std::string::npos) << fewer.output;
  EXPECT_TRUE(std::filesystem::last_write_time(ck + "/global_step4") == saved_at) << "global_step4 was saved again";
}

TEST(TrainCli, EpochsOverTextData) {
  dsx::test::TempDir dir;
  const std::string text = dir.file("text.txt");
  {
    std::ofstream out(text);
    for (int i = 0; i < 400; ++i) out << "the quick brown fox jumps over the lazy dog " << i << "\n";
  }
  // byte-tiny reads 64-token rows; 2 ranks x 8 rows x 64 tokens = 1024 tokens per micro-step
  auto r = train(2, "--deepspeed_config " + config_file(dir, 2) + " --data text:" + text + " --epochs 2 --eval_interval 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const size_t bytes = std::filesystem::file_size(text);
  const size_t steps = 2 * ((bytes - 1) / (2 * 8 * 64)) / 2;  // 2 epochs, 2 micro-steps per step
  EXPECT_NE(r.output.find(", " + std::to_string(steps) + " steps"), std::string::npos) << r.output;
  auto e = train(2, "--deepspeed_config " + config_file(dir, 2) + " --epochs 1");
  EXPECT_NE(e.exit_code, 0);
  EXPECT_NE(e.output.find("--epochs needs data of finite size"), std::string::npos) << e.output;
}

// A --save directory that cannot be written fails at start-up, before any step is trained.
TEST(TrainCli, UnwritableSaveDirectoryIsRefusedBeforeTraining) {
  dsx::test::TempDir dir;
  std::ofstream(dir.file("a_file")) << "not a directory";
  const std::string save = dir.file("a_file/checkpoints");
  auto r = train(2, "--deepspeed_config " + config_file(dir, 2) + " --steps 50 --save " + save);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--save " + save + ": cannot write there"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step=5,"), std::string::npos) << "no step may be trained first:\n" << r.output;
}

// A loss that goes NaN/inf (lr 1e20) ends the run with an error after --max_nonfinite_steps
// steps in a row, on every rank; 0 lets it train on, as DeepSpeed does.
TEST(TrainCli, ADivergedLossEndsTheRunWithTheReason) {
  dsx::test::TempDir dir;
  const std::string cfg = dir.file("diverge.json");
  std::ofstream(cfg) << R"({"train_micro_batch_size_per_gpu": 8, "steps_per_print": 100,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e20}}, "zero_optimization": {"stage": 1}})";
  auto r = train(2, "--deepspeed_config " + cfg + " --steps 40 --eval_interval 0");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("the loss has been NaN or inf for 3 consecutive steps"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("training summary"), std::string::npos) << r.output;
  auto on = train(1, "--deepspeed_config " + cfg + " --steps 8 --eval_interval 0 --max_nonfinite_steps 0");
  EXPECT_EQ(on.exit_code, 0) << on.output;
}

// dsx export writes config.json beside the weights: it replaces its own (a re-export), never a
// file of that name that belongs to something else, and then writes nothing at all.
TEST(TrainCli, ExportNeverOverwritesAForeignConfigJson) {
  dsx::test::TempDir dir;
  auto r = train(1, "--deepspeed_config " + config_file(dir, 1) + " --steps 2 --eval_interval 0 --save " +
                        dir.file("ck"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::filesystem::create_directories(dir.file("project"));
  std::ofstream(dir.file("project/config.json")) << "{\"mine\": true}\n";
  const std::string exp = std::string(DSX_EXE) + " export " + dir.file("ck") + " --out ";
  auto refused = run_command(exp + dir.file("project/model.safetensors"));
  EXPECT_NE(refused.exit_code, 0) << refused.output;
  EXPECT_NE(refused.output.find("project/config.json exists and is not this model's"), std::string::npos)
      << refused.output;
  EXPECT_EQ(read_all(dir.file("project/config.json")), "{\"mine\": true}\n");
  EXPECT_FALSE(std::filesystem::exists(dir.file("project/model.safetensors")));
  ASSERT_EQ(run_command(exp + dir.file("out/model.safetensors")).exit_code, 0);
  auto again = run_command(exp + dir.file("out/model.safetensors"));  // its own config.json: fine
  EXPECT_EQ(again.exit_code, 0) << again.output;
}

// A Hugging Face style config ("auto" everywhere) trains with the flags that fill it, named as
// dsx config check names them; a bad --steps is called --steps.
TEST(TrainCli, HfAutoConfigTrainsWithItsFillFlags) {
  const std::string cfg = std::string(DSX_SOURCE_DIR) + "/configs/hf_auto.json";
  auto r = train(2, "--deepspeed_config " + cfg + " --micro-batch 4 --grad-accum 2 --lr 1e-3 --steps 4 --eval_interval 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("batch 16 = 4 x 2 x 2"), std::string::npos) << r.output;
  auto missing = train(1, "--deepspeed_config " + cfg + " --steps 4");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("pass --micro-batch"), std::string::npos) << missing.output;
  auto zero = train(1, "--deepspeed_config " + cfg + " --micro-batch 4 --steps 0");
  EXPECT_NE(zero.exit_code, 0);
  EXPECT_NE(zero.output.find("--steps must be a positive number"), std::string::npos) << zero.output;
  EXPECT_EQ(zero.output.find("--total-steps"), std::string::npos) << zero.output;
}

TEST(TrainCli, MissingConfigSaysWhatToPass) {
  auto r = run_command(std::string(DSX_EXE) + " train --steps 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--deepspeed_config"), std::string::npos) << r.output;
}

}  // namespace
