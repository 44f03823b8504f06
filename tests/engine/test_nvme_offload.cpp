// ZeRO-Infinity's NVMe offload through `dsx train` on 2 real ranks: swapping the optimizer state
// (with the fp32 master) and the parameters changes no weight, checkpoints carry the state out of
// the swap files, a job killed mid-swap resumes from its last save losing nothing else, and a
// vanished or too small nvme_path stops the run with the path named and the last checkpoint
// intact (these three with parameters and optimizer both swapped).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include "tests/comm/free_port.h"
#include "tests/engine/test_files.h"
#include "tests/models/temp_dir.h"
#include "tests/tools/run_command.h"

namespace {

using dsx::test::read_all;
using dsx::test::run_command;

// The parameters swapped too: a few small layers stay in memory, the rest (most of the model)
// are read through 3 buffers.
const std::string kSwappedParams = R"("buffer_count": 3, "buffer_size": 100000, "max_in_cpu": 10000)";

const std::string kPipelined =
    R"("pipeline_read": true, "pipeline_write": true, "buffer_count": 6)";
const std::string kAio = R"({"block_size": 65536, "queue_depth": 4, "intra_op_parallelism": 2})";

// Stage 3, sub-groups of 5000 elements (several per rank), and, with `nvme`, the optimizer
// state swapped under dir/nvme with `extra` added to the offload block, and with `param` the
// parameters (offload_param with these keys).
std::string config_file(
    const dsx::test::TempDir& dir, const std::string& name, bool nvme,
    const std::string& extra = kPipelined, const std::string& aio = kAio,
    const std::string& param = "") {
  std::filesystem::create_directories(dir.file("nvme"));
  std::string offload = nvme ? R"(, "offload_optimizer": {"device": "nvme", "nvme_path": ")" +
                                   dir.file("nvme") + "\", " + extra + "}"
                             : "";
  if (!param.empty()) {
    offload += R"(, "offload_param": {"device": "nvme", "nvme_path": ")" + dir.file("nvme") +
               "\", " + param + "}";
  }
  const std::string path = dir.file(name);
  std::ofstream(path)
      << R"({"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 2,
    "steps_per_print": 5, "optimizer": {"type": "AdamW", "params": {"lr": 2e-3, "weight_decay": 0.01}},
    "aio": )"
      << aio
      << R"(, "zero_optimization": {"stage": 3, "overlap_comm": true, "reduce_bucket_size": 20000,
    "sub_group_size": 5000)"
      << offload << "}}";
  return "--deepspeed_config " + path + " --eval_interval 0 ";
}

dsx::test::CommandResult train(const std::string& args) {
  const std::string launch = std::string(DSX_EXE) + " launch --num_gpus 2 --master_port " +
                             std::to_string(dsx::test::free_port()) + " ";
  return run_command("OMP_NUM_THREADS=1 timeout 300 " + launch + DSX_EXE +
                     " train --progress plain --samples 0 " + args);
}

TEST(NvmeOffload, SwappedOptimizerGivesTheSameWeightsBitForBit) {
  dsx::test::TempDir dir;
  auto plain = train(config_file(dir, "plain.json", false) + "--steps 12 --save " + dir.file("a"));
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  auto swapped = train(config_file(dir, "nvme.json", true) + "--steps 12 --save " + dir.file("b"));
  ASSERT_EQ(swapped.exit_code, 0) << swapped.output;
  EXPECT_NE(plain.output.find("optimizer 0.482304 MB"), std::string::npos) << plain.output;
  EXPECT_NE(swapped.output.find("optimizer 0 MB"), std::string::npos)
      << "the state stayed in memory\n"
      << swapped.output;
  EXPECT_EQ(swapped.output.find("changes nothing"), std::string::npos) << swapped.output;
  const std::string a = read_all(dir.file("a/model.safetensors"));
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == read_all(dir.file("b/model.safetensors"))) << "NVMe offload changed the weights";
  // Without pipelining, one buffer, one block in flight submitted singly: the same again.
  auto serial = train(config_file(dir, "serial.json", true, R"("buffer_count": 1)",
                                  R"({"block_size": 4096, "queue_depth": 1, "single_submit": true,
                                      "overlap_events": false})") +
                      "--steps 12 --save " + dir.file("c"));
  ASSERT_EQ(serial.exit_code, 0) << serial.output;
  EXPECT_TRUE(a == read_all(dir.file("c/model.safetensors")))
      << "unpipelined NVMe offload changed the weights";
  // The scratch is gone when the run ends; the checkpoint does not need it.
  EXPECT_FALSE(std::filesystem::exists(dir.file("nvme/dsx_swap/optimizer/rank0")));
}

// The megabytes of `kind` ("params", "optimizer") rank 0 holds, from the run's summary.
double held_mb(const std::string& output, const std::string& kind) {
  const size_t at = output.find("rank 0 holds");
  const size_t k = output.find(kind + " ", at);
  if (at == std::string::npos || k == std::string::npos) return -1;
  return std::stod(output.substr(k + kind.size() + 1));
}

// ZeRO-Infinity whole: parameters and optimizer state on NVMe (2 ranks, stage 3), the same
// weights as in memory, bit for bit, with the parameters mostly out of host memory.
TEST(NvmeOffload, SwappedParametersGiveTheSameWeightsBitForBit) {
  dsx::test::TempDir dir;
  auto plain = train(config_file(dir, "plain.json", false) + "--steps 8 --save " + dir.file("a"));
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const std::string aio = kAio;
  auto swapped = train(config_file(dir, "nvme.json", true, R"("pipeline_read": true)", aio,
                                   kSwappedParams) +
                       "--steps 8 --save " + dir.file("b"));
  ASSERT_EQ(swapped.exit_code, 0) << swapped.output;
  EXPECT_NE(swapped.output.find("parameter shards are swapped"), std::string::npos)
      << swapped.output;
  const double plain_params = held_mb(plain.output, "params");
  const double swapped_params = held_mb(swapped.output, "params");
  EXPECT_GT(plain_params, 0.2) << plain.output;
  EXPECT_LE(swapped_params, 0.04) << "more than max_in_cpu elements stayed in memory\n"
                                  << swapped.output;
  EXPECT_EQ(held_mb(swapped.output, "optimizer"), 0) << "the fp32 master stayed in memory\n"
                                                     << swapped.output;
  const std::string a = read_all(dir.file("a/model.safetensors"));
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == read_all(dir.file("b/model.safetensors")))
      << "parameter NVMe offload changed the weights";
  // Parameters alone on NVMe (optimizer in memory), one buffer, nothing resident: the same again.
  auto alone = train(config_file(dir, "param.json", false, "", aio,
                                 R"("buffer_count": 1, "buffer_size": 100000, "max_in_cpu": 0)") +
                     "--steps 8 --save " + dir.file("c"));
  ASSERT_EQ(alone.exit_code, 0) << alone.output;
  EXPECT_EQ(held_mb(alone.output, "params"), 0) << alone.output;
  // The fp32 master is kept apart from the swapped shards: with the optimizer in memory, there.
  EXPECT_NEAR(held_mb(alone.output, "optimizer"), 3 * held_mb(plain.output, "optimizer") / 2, 1e-6)
      << alone.output;
  EXPECT_TRUE(a == read_all(dir.file("c/model.safetensors")))
      << "parameter NVMe offload without optimizer offload changed the weights";
  EXPECT_FALSE(std::filesystem::exists(dir.file("nvme/dsx_swap/params/rank0")));
}

// The optimizer state leaves the swap files through the checkpoint and comes back into new ones.
TEST(NvmeOffload, ResumingFromACheckpointGivesTheSameWeights) {
  dsx::test::TempDir dir;
  const std::string config = config_file(dir, "nvme.json", true);
  ASSERT_EQ(train(config + "--steps 10 --save " + dir.file("a")).exit_code, 0);
  ASSERT_EQ(train(config + "--steps 5 --save " + dir.file("b")).exit_code, 0);
  auto resumed = train(config + "--steps 10 --load " + dir.file("b") + " --save " + dir.file("c"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_TRUE(read_all(dir.file("a/model.safetensors")) ==
              read_all(dir.file("c/model.safetensors")))
      << "the optimizer state was lost between the swap files and the checkpoint";
}

// dsx launch of the 2-rank NVMe job in its own process group, its output in `log`.
pid_t start_job(const std::string& config_path, const std::string& save, const std::string& log,
                bool load) {
  const std::string port = std::to_string(dsx::test::free_port());
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(out, 2);
    ::setenv("OMP_NUM_THREADS", "1", 1);
    ::execl(DSX_EXE, DSX_EXE, "launch", "--num_gpus", "2", "--master_port", port.c_str(), DSX_EXE,
            "train", "--deepspeed_config", config_path.c_str(), "--steps", "60", "--save",
            save.c_str(), "--save_interval", "1", "--eval_interval", "0", "--progress", "plain",
            "--samples", "0", load ? "--load" : nullptr, save.c_str(), nullptr);
    ::_exit(127);
  }
  return pid;
}

// Waits (up to a minute) until the checkpoint directory's `latest` names another save than
// `before`; returns what it names now.
std::string wait_for_new_save(const std::string& checkpoints, const std::string& before) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::string now = read_all(checkpoints + "/latest");
  while ((now.empty() || now == before) && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    now = read_all(checkpoints + "/latest");
  }
  return now;
}

// SIGKILL at random moments of a job that swaps 12 sub-groups a step and saves every step; each
// time the swap scratch is wiped, as a reboot of a scratch drive would, and the next job resumes
// from `latest`. The end weights equal a run never killed: nothing beyond the last save is lost,
// and no checkpoint needed a swap file.
TEST(NvmeOffload, KilledAtRandomMomentsResumesLosingNothing) {
  dsx::test::TempDir dir;
  config_file(dir, "nvme.json", true, kPipelined, kAio, kSwappedParams);
  const std::string config = dir.file("nvme.json");
  auto straight = train("--deepspeed_config " + config + " --eval_interval 0 --steps 60 --save " +
                        dir.file("a"));
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  std::mt19937 rng(11);
  int kills = 0;
  std::string latest;
  for (int round = 0; round < 3; ++round) {
    pid_t pid = start_job(config, dir.file("ck"), dir.file("log"), round > 0);
    ASSERT_GT(pid, 0);
    latest = wait_for_new_save(dir.file("ck"), latest);  // this job trains and saves: kill it soon
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 300)(rng)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) ++kills;
    latest = read_all(dir.file("ck/latest"));  // where the next job resumes
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the ranks follow their launcher
    std::filesystem::remove_all(dir.file("nvme/dsx_swap"));
  }
  EXPECT_GE(kills, 1) << read_all(dir.file("log"));
  auto resumed = train("--deepspeed_config " + config + " --eval_interval 0 --steps 60 --load " +
                       dir.file("ck") + " --save " + dir.file("ck"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from"), std::string::npos) << "no save before the kills\n"
                                                                    << resumed.output;
  EXPECT_TRUE(read_all(dir.file("a/model.safetensors")) ==
              read_all(dir.file("ck/model.safetensors")))
      << "weights after kills and resumes differ from the straight run";
}

// The swap directory removed under a running job: the job stops with the swap file named, and
// the last checkpoint still verifies.
TEST(NvmeOffload, AVanishedNvmePathStopsTheRunNamingItWithTheCheckpointIntact) {
  dsx::test::TempDir dir;
  config_file(dir, "nvme.json", true, kPipelined, kAio, kSwappedParams);
  pid_t pid = start_job(dir.file("nvme.json"), dir.file("ck"), dir.file("log"), false);
  ASSERT_GT(pid, 0);
  wait_for_new_save(dir.file("ck"), "");
  std::filesystem::remove_all(dir.file("nvme/dsx_swap"));
  int status = 0;
  ::waitpid(pid, &status, 0);
  const std::string log = read_all(dir.file("log"));
  ASSERT_TRUE(WIFEXITED(status)) << log;
  EXPECT_NE(WEXITSTATUS(status), 0) << "the job went on without its swap files\n" << log;
  // The error path tears the engine down in stream order: no rank aborts on the way out.
  EXPECT_EQ(log.find("stream-order violation"), std::string::npos) << log;
  EXPECT_EQ(log.find("terminated with signal"), std::string::npos) << log;
  // Whichever swap file the job touched first: the optimizer's or the parameters'.
  EXPECT_TRUE(log.find(dir.file("nvme/dsx_swap/optimizer/rank")) != std::string::npos ||
              log.find(dir.file("nvme/dsx_swap/params/rank")) != std::string::npos)
      << log;
  auto verify = run_command(std::string(DSX_EXE) + " checkpoint verify " + dir.file("ck"));
  EXPECT_EQ(verify.exit_code, 0) << verify.output;
}

// A drive too small for the swap files is refused before the first step, naming nvme_path. The
// limit is real: RLIMIT_FSIZE (ulimit -f, in KiB) makes the space reservation fail as a full drive
// would (SIGXFSZ ignored, so the call fails with EFBIG instead of killing the process).
TEST(NvmeOffload, ADriveTooSmallIsRefusedAtStartNamingNvmePath) {
  dsx::test::TempDir dir;
  const std::string config = config_file(dir, "nvme.json", true, kPipelined, kAio, kSwappedParams);
  auto r = run_command("trap '' XFSZ; ulimit -f 64 && FI_PROVIDER=tcp FI_TCP_IFACE=lo " +
                       std::string(DSX_EXE) + " train --progress plain --samples 0 " + config +
                       "--steps 2");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("nvme_path " + dir.file("nvme")), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("too small"), std::string::npos) << r.output;
}

// What dsx does not swap says so: LAMB is refused with what to use instead, and below stage 3
// "nvme" runs as "cpu" (as in DeepSpeed), said in a note, with nothing written under nvme_path.
TEST(NvmeOffload, WhatIsNotSwappedIsSaid) {
  dsx::test::TempDir dir;
  std::string config = config_file(dir, "lamb.json", true);
  std::string text = read_all(dir.file("lamb.json"));
  text.replace(text.find("\"AdamW\""), 7, "\"Lamb\"");
  text.replace(text.find("\"aio\""), 5, "\"zero_allow_untested_optimizer\": true, \"aio\"");
  std::ofstream(dir.file("lamb.json")) << text;
  auto lamb = run_command(std::string(DSX_EXE) + " train --progress plain --samples 0 " + config +
                          "--steps 1 2>&1");
  EXPECT_NE(lamb.exit_code, 0) << lamb.output;
  EXPECT_NE(lamb.output.find("with LAMB"), std::string::npos) << lamb.output;
  config = config_file(dir, "stage2.json", true, kPipelined, kAio, kSwappedParams);
  text = read_all(dir.file("stage2.json"));
  text.replace(text.find("\"stage\": 3"), 10, "\"stage\": 2");
  std::ofstream(dir.file("stage2.json")) << text;
  auto stage2 = run_command(std::string(DSX_EXE) + " train --progress plain --samples 0 " + config +
                            "--steps 1 2>&1");
  EXPECT_EQ(stage2.exit_code, 0) << stage2.output;
  EXPECT_NE(stage2.output.find("runs it as \"cpu\" below stage 3"), std::string::npos)
      << stage2.output;
  EXPECT_NE(stage2.output.find("offload_param.device \"nvme\" at stage 2: DeepSpeed uses "
                               "offload_param at stage 3 only and ignores it below"),
            std::string::npos)
      << stage2.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("nvme/dsx_swap")));
}

}  // namespace
