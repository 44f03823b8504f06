// `--max_restarts` (torchrun's) with real processes: a failed rank stops the job and the job starts
// again with the next TORCHELASTIC_RESTART_COUNT, up to the limit; a signal to the launcher is
// never restarted; a stopped rank counts as failed; and a 4-rank `dsx train` killed three times
// (kill -9 from outside) and stopped once finishes by itself, resuming from its --save each time,
// bit-identical to a run that was never interrupted.
#include <signal.h>

#include <cstdlib>
#include <cstring>

#include "tests/expect_contains.h"
#include "tests/launcher/launch_test_util.h"
#include "tests/tools/run_command.h"

using namespace dsx::test;

namespace {

struct Restarts : testing::Test {
  ScratchDir dir;

  // rank_probe.sh's fail_restarts: rank 2 exits 7 while the restart count is below `until`.
  int probe(int max_restarts, int until) {
    std::vector<std::string> argv = {DSX_EXE,          "launch",
                                     "--num_gpus",     "4",
                                     "--master_port",  std::to_string(free_port()),
                                     "--kill_grace_s", "5",
                                     "--max_restarts", std::to_string(max_restarts),
                                     probe_script()};
    Background run(argv,
                   {"DSX_TEST_OUT=" + dir.path(), "DSX_TEST_MODE=fail_restarts", "DSX_TEST_RANK=2",
                    "DSX_TEST_CODE=7", "DSX_TEST_UNTIL=" + std::to_string(until)},
                   dir / "launch.out");
    const int code = run.wait(60);
    expect_nothing_left("DSX_TEST_OUT=" + dir.path());
    return code;
  }
  std::string output() const { return read_text(dir / "launch.out"); }
};

}  // namespace

TEST_F(Restarts, AFailedRankRestartsEveryRankWithTheNextRestartCount) {
  ASSERT_EQ(probe(3, 2), 0) << output();
  EXPECT_CONTAINS(output(), "rank 2 (pid ");
  EXPECT_CONTAINS(output(), "exited with code 7; restarting the job (restart 1 of 3)");
  EXPECT_CONTAINS(output(), "restarting the job (restart 2 of 3)");
  EXPECT_EQ(output().find("restart 3 of 3"), std::string::npos) << output();
  for (int r = 0; r < 4; ++r) {
    for (int attempt = 0; attempt < 3; ++attempt)
      EXPECT_TRUE(exists(dir / ("rank" + std::to_string(r) + ".started" + std::to_string(attempt))))
          << r << " " << attempt;
    expect_vars(read_env(dir / ("rank" + std::to_string(r) + ".env")),
                {{"TORCHELASTIC_RESTART_COUNT", "2"}, {"TORCHELASTIC_MAX_RESTARTS", "3"}},
                "rank " + std::to_string(r));
  }
}

TEST_F(Restarts, TheLastFailureEndsTheJobWithItsExitCode) {
  EXPECT_EQ(probe(1, 99), 7) << output();
  EXPECT_CONTAINS(output(), "restarting the job (restart 1 of 1)");
  EXPECT_CONTAINS(output(), "exited with code 7; no restarts left (1 of 1 used)");
  EXPECT_FALSE(exists(dir / "rank0.started2"));
}

TEST_F(Restarts, ANegativeCountIsRefusedBeforeAnythingStarts) {
  const auto r = run_command(std::string(DSX_EXE) + " launch --max_restarts -1 " + probe_script() + " 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_CONTAINS(r.output, "--max_restarts -1: give 0 or more restarts");
}

TEST_F(Restarts, ASignalToTheLauncherIsNotRestarted) {
  std::vector<std::string> argv = {DSX_EXE,          "launch",
                                   "--num_gpus",     "2",
                                   "--master_port",  std::to_string(free_port()),
                                   "--kill_grace_s", "5",
                                   "--max_restarts", "3",
                                   probe_script()};
  Background run(argv, {"DSX_TEST_OUT=" + dir.path(), "DSX_TEST_MODE=sleep"}, dir / "launch.out");
  ASSERT_TRUE(wait_for([&] { return exists(dir / "rank0.pid") && exists(dir / "rank1.pid"); }, 20))
      << output();
  run.signal(SIGINT);
  EXPECT_EQ(run.wait(20), 130) << output();
  EXPECT_EQ(output().find("restarting"), std::string::npos) << output();
  expect_nothing_left("DSX_TEST_OUT=" + dir.path());
}

// The watchdog for a rank that is alive but stopped: after DSX_COMM_TIMEOUT it is a failed rank,
// reported by name, and the job restarts (the stopped process is continued to take its SIGTERM).
TEST_F(Restarts, AStoppedRankIsTreatedAsFailedAndRestarted) {
  std::vector<std::string> argv = {DSX_EXE,          "launch",
                                   "--num_gpus",     "2",
                                   "--master_port",  std::to_string(free_port()),
                                   "--kill_grace_s", "5",
                                   "--max_restarts", "1",
                                   probe_script()};
  Background run(argv,
                 {"DSX_TEST_OUT=" + dir.path(), "DSX_TEST_MODE=sleep_first", "DSX_COMM_TIMEOUT=2"},
                 dir / "launch.out");
  ASSERT_TRUE(wait_for([&] { return exists(dir / "rank0.pid") && exists(dir / "rank1.pid"); }, 20))
      << output();
  const pid_t stopped = read_pid(dir / "rank1.pid");
  const auto start = Clock::now();
  ASSERT_EQ(::kill(stopped, SIGSTOP), 0);
  ASSERT_EQ(run.wait(30), 0) << output();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_GE(seconds, 2.0);
  EXPECT_LT(seconds, 10.0) << "the stopped rank was not failed at the timeout";
  EXPECT_CONTAINS(
      output(),
      "rank 1 (pid " + std::to_string(stopped) +
          ") has been stopped (SIGSTOP) for 2 s (DSX_COMM_TIMEOUT); treating it as failed");
  EXPECT_CONTAINS(output(), "restarting the job (restart 1 of 1)");
  EXPECT_TRUE(exists(dir / "rank1.term")) << "the stopped rank was continued and took its SIGTERM";
  expect_nothing_left("DSX_TEST_OUT=" + dir.path());
}

namespace {

// The pid of the `dsx train` rank `rank` of the launch marked `marker`, once it runs (0: none).
pid_t train_rank_pid(const std::string& marker, int rank) {
  for (pid_t pid : processes_with_env(marker)) {
    const auto env = read_env_of(pid);
    if (env.count("RANK") && env.at("RANK") == std::to_string(rank)) return pid;
  }
  return 0;
}

}  // namespace

TEST_F(Restarts, FourRanksKilledThreeTimesAndStoppedOnceEndBitIdenticalToAnUninterruptedRun) {
  std::ofstream(dir / "ds_config.json")
      << R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "steps_per_print": 1000,
            "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}, "zero_optimization": {"stage": 2}})";
  const std::string marker = "DSX_TEST_OUT=" + dir.path();
  const auto train = [&](const std::string& save, int max_restarts,
                         const std::string& comm_timeout = "300") {
    std::vector<std::string> argv = {DSX_EXE,
                                     "launch",
                                     "--num_gpus",
                                     "4",
                                     "--master_port",
                                     std::to_string(free_port()),
                                     "--kill_grace_s",
                                     "3",
                                     "--max_restarts",
                                     std::to_string(max_restarts),
                                     DSX_EXE,
                                     "train",
                                     "--deepspeed_config",
                                     dir / "ds_config.json",
                                     "--model",
                                     "byte-tiny",
                                     "--eval_interval",
                                     "0",
                                     "--samples",
                                     "0",
                                     "--progress",
                                     "plain",
                                     "--steps",
                                     "200",
                                     "--save_interval",
                                     "10",
                                     "--save",
                                     save};
    return std::make_unique<Background>(
        argv,
        std::vector<std::string>{"FI_TCP_IFACE=lo", "FI_SOCKETS_IFACE=lo", "OMP_NUM_THREADS=1",
                                 marker, "DSX_COMM_TIMEOUT=" + comm_timeout},
        dir / (save + ".out"), dir.path());
  };
  ASSERT_EQ(train("reference", 0)->wait(120), 0) << read_text(dir / "reference.out");

  auto run = train("ck", 4, "5");
  // Each time a new checkpoint is committed, rank k is killed (-9) from outside; the fourth time,
  // rank 0 is stopped (SIGSTOP) and the watchdog or its peers' collective timeout fails it.
  for (int k = 1; k <= 4; ++k) {
    const std::string before = read_text(dir / "ck/latest");
    ASSERT_TRUE(wait_for(
        [&] {
          const auto now = read_text(dir / "ck/latest");
          return !now.empty() && now != before;
        },
        60))
        << read_text(dir / "ck.out");
    pid_t pid = 0;
    ASSERT_TRUE(wait_for([&] { return (pid = train_rank_pid(marker, k % 4)) > 0; }, 20))
        << read_text(dir / "ck.out");
    ASSERT_EQ(::kill(pid, k < 4 ? SIGKILL : SIGSTOP), 0);
  }
  ASSERT_EQ(run->wait(180), 0) << read_text(dir / "ck.out");
  expect_nothing_left(marker);
  const std::string out = read_text(dir / "ck.out");
  EXPECT_CONTAINS(out, "was killed by signal 9 (Killed); restarting the job (restart 3 of 4)");
  EXPECT_CONTAINS(out, "restarting the job (restart 4 of 4)");
  EXPECT_CONTAINS(out, "dsx train: resumed from ck/global_step");
  EXPECT_EQ(read_text(dir / "ck/latest"), "global_step200");

  const auto exported = [&](const std::string& save) {
    const std::string file = dir / (save + ".safetensors");
    const auto e = run_command(std::string(DSX_EXE) + " export " + (dir / save) + " --out " + file);
    EXPECT_EQ(e.exit_code, 0) << e.output;
    return read_text(file);
  };
  EXPECT_EQ(exported("ck"), exported("reference")) << "the restarted run's weights differ";
  for (int r = 0; r < 4; ++r) {
    const std::string name = "/global_step200/zero_pp_rank_" + std::to_string(r) +
                             "_mp_rank_00_optim_states.safetensors";
    EXPECT_EQ(read_text(dir / ("ck" + name)), read_text(dir / ("reference" + name)))
        << "rank " << r << "'s optimizer state";
  }
}

// The watchdog for a step that hangs outside any collective: `dsx train` writes its step number
// for the launcher after every step (DSX_PROGRESS_FILE); the test hook makes the first start spin
// in its own code after step 3. No collective waits and nothing is stopped, so only the step
// watchdog can see it: it names the rank, the last step and how long, and the job restarts,
// resumes from the step-2 save and finishes.
TEST_F(Restarts, ARankSpinningInItsOwnCodeIsReportedAsHungAndRestarted) {
  std::ofstream(dir / "ds_config.json")
      << R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "steps_per_print": 1000,
            "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}, "zero_optimization": {"stage": 1}})";
  const std::string marker = "DSX_TEST_OUT=" + dir.path();
  std::vector<std::string> argv = {
      DSX_EXE,  "launch",        "--num_gpus",         "1",    "--master_port",
      std::to_string(free_port()), "--kill_grace_s",   "3",    "--max_restarts",
      "1",      DSX_EXE,         "train",              "--deepspeed_config",
      dir / "ds_config.json",    "--model",            "byte-tiny", "--eval_interval",
      "0",      "--samples",     "0",                  "--progress", "plain",
      "--steps", "6",            "--save_interval",    "2",    "--save",
      dir / "ck"};
  Background run(argv,
                 {"FI_TCP_IFACE=lo", "FI_SOCKETS_IFACE=lo", "OMP_NUM_THREADS=1", marker,
                  "DSX_COMM_TIMEOUT=2", "DSX_TEST_SPIN_AT_STEP=3"},
                 dir / "launch.out");
  ASSERT_EQ(run.wait(60), 0) << output();
  expect_nothing_left(marker);
  EXPECT_CONTAINS(output(), "rank 0 (pid ");
  EXPECT_CONTAINS(output(), "made no progress for ");
  EXPECT_CONTAINS(output(),
                  "s after step 3 (DSX_COMM_TIMEOUT, 2 s, beyond its slowest step, ");
  EXPECT_CONTAINS(output(), "treating it as hung; restarting the job (restart 1 of 1)");
  EXPECT_CONTAINS(output(), "dsx train: resumed from " + (dir / "ck") + "/global_step2 at step 2");
  EXPECT_EQ(read_text(dir / "ck/latest"), "global_step6");
  // The rank was failed between 2 s (the timeout) and a few seconds more (its slowest step and
  // the poll), not at some later time.
  const auto at = output().find("made no progress for ");
  const double seconds = std::atof(output().c_str() + at + std::strlen("made no progress for "));
  EXPECT_GE(seconds, 2.0);
  EXPECT_LT(seconds, 6.0);
}
