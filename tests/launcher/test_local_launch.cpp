// `dsx launch` on this machine with real rank processes: the environment of 4 ranks, a failing
// rank stopping the others, signals, exit codes, per-rank logs, pid file, core binding, and the
// errors users meet (port in use, bad hostfile line, missing program).
#include <netinet/in.h>
#include <sys/socket.h>

#include <regex>

#include "tests/expect_contains.h"
#include "tests/launcher/launch_test_util.h"
#include "tests/tools/run_command.h"

using namespace dsx::test;

namespace {

struct LocalLaunch : testing::Test {
  ScratchDir dir;
  int port = free_port();

  std::vector<std::string> env(const std::string& mode, int rank = -1, int code = 0) const {
    return {"DSX_TEST_OUT=" + dir.path(), "DSX_TEST_MODE=" + mode, "DSX_TEST_RANK=" + std::to_string(rank),
            "DSX_TEST_CODE=" + std::to_string(code)};
  }
  std::vector<std::string> launch(const std::vector<std::string>& flags, const std::vector<std::string>& args = {}) const {
    std::vector<std::string> argv = {DSX_EXE, "launch", "--master_port", std::to_string(port), "--kill_grace_s", "5"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back(probe_script());
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
  std::string output() const { return read_text(dir / "launch.out"); }
};

}  // namespace

TEST_F(LocalLaunch, FourRanksGetTheirEnvironmentArgumentsAndPrefixedOutput) {
  Background run(launch({"--num_gpus", "4"}, {"a", "b c"}), env("ok"), dir / "launch.out");
  ASSERT_EQ(run.wait(30), 0) << output();
  for (int r = 0; r < 4; ++r) {
    auto e = read_env(dir / ("rank" + std::to_string(r) + ".env"));
    std::string rs = std::to_string(r);
    expect_vars(e,
                {{"RANK", rs},
                 {"LOCAL_RANK", rs},
                 {"WORLD_SIZE", "4"},
                 {"LOCAL_WORLD_SIZE", "4"},
                 {"LOCAL_SIZE", "4"},
                 {"CROSS_RANK", "0"},
                 {"CROSS_SIZE", "1"},
                 {"GROUP_RANK", "0"},
                 {"ROLE_RANK", rs},
                 {"MASTER_ADDR", "127.0.0.1"},
                 {"MASTER_PORT", std::to_string(port)},
                 {"CUDA_VISIBLE_DEVICES", "0,1,2,3"},
                 {"TORCHELASTIC_USE_AGENT_STORE", "False"},
                 {"DSX_TEST_MODE", "ok"}},  // the launcher's environment is inherited
                "rank " + rs);
    // ranks sharing the node share its cores (as torchrun sets OMP_NUM_THREADS), unless the user set it
    if (!std::getenv("OMP_NUM_THREADS")) {
      const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
      EXPECT_EQ(e["OMP_NUM_THREADS"], std::to_string(std::max(1L, cores / 4)));
    }
    // one store secret per job, the same for every rank
    EXPECT_EQ(e["DSX_STORE_SECRET"].size(), 32u);
    EXPECT_EQ(e["DSX_STORE_SECRET"], read_env(dir / "rank0.env")["DSX_STORE_SECRET"]);
    EXPECT_EQ(read_text(dir / ("rank" + rs + ".args")), "--local_rank=" + rs + "\na\nb c\n");
    EXPECT_CONTAINS(output(), "[rank" + rs + "]: rank " + rs + " says hello\n");
    EXPECT_NE(output().find("[rank" + rs + "]: rank " + rs + " to stderr\n"), std::string::npos);
  }
}

// A rank's progress bar (a carriage-return redraw with no newline) reaches the launcher's output at
// once, not when the line ends.
TEST_F(LocalLaunch, ProgressBarRedrawsPassThroughAtOnce) {
  Background run(launch({"--num_gpus", "1"}), env("bar"), dir / "launch.out");
  bool seen = false;
  for (int i = 0; i < 40 && !seen; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    seen = output().find("[rank0]: \r[rank0]: step 1 of 2") != std::string::npos;
  }
  EXPECT_TRUE(seen) << "the redraw was held back: " << output();
  ASSERT_EQ(run.wait(30), 0) << output();
  // Every redraw starts with the rank's prefix: the carriage return would otherwise draw over it.
  EXPECT_CONTAINS(output(), "\r[rank0]: step 1 of 2\r[rank0]: step 2 of 2\n");
}

TEST_F(LocalLaunch, VisibleDevicesAndIncludePickSlots) {
  Background run(launch({"--include", "localhost:1,3", "--no_local_rank"}), {"DSX_TEST_OUT=" + dir.path(), "CUDA_VISIBLE_DEVICES=0,1,2,3"},
                 dir / "launch.out");
  ASSERT_EQ(run.wait(30), 0) << output();
  EXPECT_EQ(read_env(dir / "rank1.env")["CUDA_VISIBLE_DEVICES"], "1,3");
  EXPECT_EQ(read_text(dir / "rank1.args"), "\n");  // --no_local_rank: no arguments at all
  EXPECT_FALSE(exists(dir / "rank2.env"));
}

TEST_F(LocalLaunch, FailingRankStopsTheOthersAndItsExitCodeIsReturned) {
  auto start = Clock::now();
  Background run(launch({"--num_gpus", "4"}), env("fail", 2, 7), dir / "launch.out");
  ASSERT_EQ(run.wait(30), 7) << output();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 15.0);
  for (int r : {0, 1, 3}) {
    EXPECT_TRUE(exists(dir / ("rank" + std::to_string(r) + ".term"))) << "rank " << r << " got no SIGTERM\n" << output();
    EXPECT_FALSE(process_alive(read_pid(dir / ("rank" + std::to_string(r) + ".pid"))));
  }
  EXPECT_NE(output().find("rank 2 (pid"), std::string::npos);
  EXPECT_NE(output().find("exited with code 7; stopping all processes of the job"), std::string::npos) << output();
  expect_nothing_left("DSX_TEST_OUT=" + dir.path());
}

TEST_F(LocalLaunch, RankKilledBySignalIsAFailure) {
  Background run(launch({"--num_gpus", "3"}), env("selfkill", 1), dir / "launch.out");
  EXPECT_EQ(run.wait(30), 128 + SIGKILL) << output();
  EXPECT_NE(output().find("rank 1 (pid"), std::string::npos);
  EXPECT_CONTAINS(output(), "was killed by signal 9");
  EXPECT_TRUE(exists(dir / "rank0.term"));
}

TEST_F(LocalLaunch, RanksIgnoringSigtermAreKilledAfterTheGracePeriod) {
  auto start = Clock::now();
  auto argv = launch({"--num_gpus", "3"});
  argv[5] = "1";  // --kill_grace_s 1
  Background run(argv, env("ignore_term", 0, 5), dir / "launch.out");
  ASSERT_EQ(run.wait(30), 5) << output();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 10.0);
  EXPECT_NE(output().find("still running after 1 s; sending SIGKILL"), std::string::npos) << output();
  for (int r : {1, 2}) EXPECT_FALSE(process_alive(read_pid(dir / ("rank" + std::to_string(r) + ".pid"))));
}

TEST_F(LocalLaunch, SigintAndSigtermAreForwardedToEveryRank) {
  for (int sig : {SIGINT, SIGTERM}) {
    for (int r = 0; r < 2; ++r) std::filesystem::remove(dir / ("rank" + std::to_string(r) + ".pid"));
    Background run(launch({"--num_gpus", "2"}), env("sleep"), dir / "launch.out");
    ASSERT_TRUE(wait_for([&] { return exists(dir / "rank0.pid") && exists(dir / "rank1.pid"); }, 20)) << output();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // traps installed
    run.signal(sig);
    EXPECT_EQ(run.wait(20), 128 + sig) << output();
    const char* mark = sig == SIGINT ? ".int" : ".term";
    for (int r = 0; r < 2; ++r) {
      EXPECT_TRUE(exists(dir / ("rank" + std::to_string(r) + mark))) << strsignal(sig) << " not forwarded to rank " << r;
      EXPECT_FALSE(process_alive(read_pid(dir / ("rank" + std::to_string(r) + ".pid"))));
    }
  }
}

TEST_F(LocalLaunch, KilledLauncherTakesItsRanksWithIt) {
  Background run(launch({"--num_gpus", "2"}), env("sleep"), dir / "launch.out");
  ASSERT_TRUE(wait_for([&] { return exists(dir / "rank0.pid") && exists(dir / "rank1.pid"); }, 20)) << output();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ::kill(run.pid(), SIGKILL);  // no chance to clean up: the kernel's parent-death signal must do it
  EXPECT_EQ(run.wait(10), 128 + SIGKILL);
  for (int r = 0; r < 2; ++r) {
    pid_t pid = read_pid(dir / ("rank" + std::to_string(r) + ".pid"));
    EXPECT_TRUE(wait_for([&] { return !process_alive(pid); }, 10)) << "rank " << r << " outlived its launcher";
  }
  expect_nothing_left("DSX_TEST_OUT=" + dir.path());
}

TEST_F(LocalLaunch, NoSshRunsOnlyTheGivenNodeOfTheHostfile) {
  std::ofstream(dir / "hostfile") << "node-a slots=2\nnode-b slots=3\n";
  Background run(launch({"-H", dir / "hostfile", "--no_ssh", "--node_rank", "1", "--master_addr", "127.0.0.1"}), env("ok"),
                 dir / "launch.out");
  ASSERT_EQ(run.wait(30), 0) << output();
  EXPECT_FALSE(exists(dir / "rank0.env"));
  for (int r = 2; r < 5; ++r) {
    auto e = read_env(dir / ("rank" + std::to_string(r) + ".env"));
    EXPECT_EQ(e["NODE_RANK"], "1");
    EXPECT_EQ(e["WORLD_SIZE"], "5");
    EXPECT_EQ(e["LOCAL_RANK"], std::to_string(r % 3));  // DeepSpeed's RANK mod LOCAL_SIZE
    EXPECT_EQ(e["CUDA_VISIBLE_DEVICES"], "0,1,2");
  }
}

TEST_F(LocalLaunch, MasterPortZeroPicksAFreePort) {
  auto argv = launch({"--num_gpus", "2"});
  argv[3] = "0";  // --master_port 0
  Background run(argv, env("ok"), dir / "launch.out");
  ASSERT_EQ(run.wait(30), 0) << output();
  std::string port0 = read_env(dir / "rank0.env")["MASTER_PORT"];
  EXPECT_EQ(read_env(dir / "rank1.env")["MASTER_PORT"], port0);
  EXPECT_GT(std::atoi(port0.c_str()), 0) << port0;
  EXPECT_CONTAINS(output(), "--master_port 0: using free port " + port0);
  // issue 33, item 22: the world line names the chosen port, not :0.
  EXPECT_CONTAINS(output(), "127.0.0.1:" + port0 + ", local");
  EXPECT_EQ(output().find(":0, local"), std::string::npos) << output();
}

TEST_F(LocalLaunch, NodeAgentAcceptsDeepSpeedsPerNodeLauncherFlags) {
  // The command line deepspeed's runner gives `python -m deepspeed.launcher.launch`, with dsx
  // standing in for it: world {"worker-0": [0, 1], "worker-1": [2]}, this is node 1.
  Background run({DSX_EXE, "launch", "--world_info=eyJ3b3JrZXItMCI6IFswLCAxXSwgIndvcmtlci0xIjogWzJdfQ==", "--node_rank=1",
                  "--master_addr=10.9.8.7", "--master_port=" + std::to_string(port), "--no_python", "--save_pid", "424242",
                  "--enable_each_rank_log=None", "--log_level=info", probe_script(), "z"},
                 env("ok"), dir / "launch.out");
  ASSERT_EQ(run.wait(30), 0) << output();
  auto e = read_env(dir / "rank2.env");
  EXPECT_EQ(e["LOCAL_RANK"], "0");
  EXPECT_EQ(e["CUDA_VISIBLE_DEVICES"], "2");
  EXPECT_EQ(e["WORLD_SIZE"], "3");
  EXPECT_EQ(e["CROSS_SIZE"], "2");
  EXPECT_EQ(e["MASTER_ADDR"], "10.9.8.7");
  EXPECT_EQ(read_text(dir / "rank2.args"), "--local_rank=0\nz\n");
  EXPECT_FALSE(exists(dir / "rank0.env"));
  EXPECT_NE(output().find("launcher pid: "), std::string::npos);
  EXPECT_FALSE(exists("/tmp/424242.deepspeed"));  // removed when the agent ends
}

TEST_F(LocalLaunch, ExitCodeOfASingleRank) {
  Background run(launch({"--num_gpus", "1"}), env("exit", -1, 3), dir / "launch.out");
  EXPECT_EQ(run.wait(30), 3) << output();
}

TEST_F(LocalLaunch, EachRankLogGetsDeepSpeedFileNames) {
  std::string logs = dir / "logs/nested";
  Background run(launch({"--num_gpus", "2", "--enable_each_rank_log", logs}), env("ok"), dir / "launch.out");
  ASSERT_EQ(run.wait(30), 0) << output();
  std::regex name(R"(\d{14}_rank([01])\.log)");
  int found = 0;
  for (const auto& f : std::filesystem::directory_iterator(logs)) {
    std::smatch m;
    std::string file = f.path().filename().string();
    ASSERT_TRUE(std::regex_match(file, m, name)) << file;
    std::string text = read_text(f.path().string());
    EXPECT_NE(text.find("rank " + m[1].str() + " says hello"), std::string::npos);
    EXPECT_NE(text.find("rank " + m[1].str() + " to stderr"), std::string::npos);
    ++found;
  }
  EXPECT_EQ(found, 2);
  EXPECT_EQ(output().find("says hello"), std::string::npos) << "rank output also went to the console";
}

TEST_F(LocalLaunch, SavePidWritesAndRemovesDeepSpeedsPidFile) {
  Background run(launch({"--num_gpus", "1", "--save_pid"}), env("sleep"), dir / "launch.out");
  std::string pid_file = "/tmp/" + std::to_string(run.pid()) + ".deepspeed";
  ASSERT_TRUE(wait_for([&] { return exists(dir / "rank0.pid"); }, 20)) << output();
  EXPECT_EQ(read_text(pid_file), std::to_string(run.pid()));
  EXPECT_NE(output().find("launcher pid: " + std::to_string(run.pid())), std::string::npos);
  run.signal(SIGTERM);
  EXPECT_EQ(run.wait(20), 128 + SIGTERM);
  EXPECT_FALSE(exists(pid_file));
}

TEST_F(LocalLaunch, BindCoresGivesEachRankItsCoreAndOmpThreads) {
  Background run(launch({"--num_gpus", "2", "--bind_cores_to_rank", "--bind_core_list", "0,1"}), env("ok"), dir / "launch.out");
  ASSERT_EQ(run.wait(30), 0) << output();
  for (int r = 0; r < 2; ++r) {
    std::string rs = std::to_string(r);
    EXPECT_EQ(read_text(dir / ("rank" + rs + ".cpus")), "Cpus_allowed_list:\t" + rs + "\n");
    EXPECT_EQ(read_env(dir / ("rank" + rs + ".env"))["OMP_NUM_THREADS"], "1");
  }
}

TEST_F(LocalLaunch, TooFewCoresForTheRanksIsAClearError) {
  auto r = run_dsx("launch --num_gpus 3 --bind_core_list 0 " + probe_script());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_CONTAINS(r.output, "cannot bind 3 ranks to 1 core(s)");
}

TEST_F(LocalLaunch, MasterPortInUseIsReportedBeforeStarting) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  auto r = run_command("DSX_TEST_OUT=" + dir.path() + " " + DSX_EXE + " launch --num_gpus 2 --master_port " + std::to_string(port) +
                       " " + probe_script());
  ::close(fd);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.output, "master port " + std::to_string(port) + " on 127.0.0.1 is already in use");
  EXPECT_FALSE(exists(dir / "rank0.env"));
}

TEST_F(LocalLaunch, BadHostfileLineNamesFileAndLine) {
  std::ofstream(dir / "hostfile") << "# cluster\nnode-a slots=2\nnode-b slot=2\n";
  auto r = run_dsx("launch -H " + (dir / "hostfile") + " " + probe_script());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.output, dir / "hostfile:3: Hostfile contains a bad entry: node-b slot=2");
}

// issue 33 item 19: these used to start one rank per slot, or run locally, and exit 0.
TEST_F(LocalLaunch, NumGpusBelowOneAndADirectoryHostfileAreRefused) {
  for (const char* flag : {"--num_gpus 0", "--num_gpus -5", "--num_accelerators 0"}) {
    auto r = run_dsx(std::string("launch ") + flag + " " + probe_script());
    EXPECT_NE(r.exit_code, 0) << flag;
    EXPECT_NE(r.output.find(": give the number of ranks per node (1 or more)"), std::string::npos) << flag << ": " << r.output;
  }
  auto r = run_dsx("launch -H " + dir.path() + " --num_gpus 1 " + probe_script());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_CONTAINS(r.output, "hostfile " + dir.path() + " is a directory");
  EXPECT_FALSE(exists(dir / "rank0.env"));
}

TEST_F(LocalLaunch, MissingProgramIsNamed) {
  auto r = run_dsx("launch --num_gpus 2 --no_python /nonexistent/dsx-program");
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_CONTAINS(r.output, "cannot start '/nonexistent/dsx-program': No such file or directory");
}

TEST_F(LocalLaunch, DryRunPrintsEveryRankAndStartsNothing) {
  auto r = run_command("DSX_TEST_OUT=" + dir.path() + " " + DSX_EXE + " launch --dry_run --num_gpus 2 --master_port 1234 train.py --x 'a b'");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("rank 1: MASTER_ADDR=127.0.0.1 MASTER_PORT=1234 WORLD_SIZE=2 RANK=1 LOCAL_RANK=1 CUDA_VISIBLE_DEVICES=0,1 "),
            std::string::npos)
      << r.output;
  EXPECT_CONTAINS(r.output, " -u train.py --local_rank=1 --x 'a b'\n");
}

TEST_F(LocalLaunch, MoreRanksThanVisibleGpusWarnsOnceOnStderr) {
  const std::string launch = std::string(DSX_EXE) + " launch --dry_run --num_gpus 2 --master_port 1234";
  auto r = run_command("(CUDA_VISIBLE_DEVICES=0 " + launch + " train.py >/dev/null)");  // stderr only
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string warning = "dsx launch: warning: 2 ranks on localhost but 1 GPU visible (CUDA_VISIBLE_DEVICES=0)";
  const auto first = r.output.find(warning);
  ASSERT_NE(first, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(warning, first + 1), std::string::npos) << "printed more than once:\n" << r.output;
  EXPECT_CONTAINS(r.output, "DSX_COMM_BACKEND=ofi");
  // --quiet (log level error) silences it; two visible GPUs for two ranks need no warning.
  EXPECT_EQ(run_command("CUDA_VISIBLE_DEVICES=0 " + launch + " --quiet train.py").output.find("warning"), std::string::npos);
  EXPECT_EQ(run_command("CUDA_VISIBLE_DEVICES=0,1 " + launch + " train.py").output.find("warning"), std::string::npos);
}

TEST_F(LocalLaunch, DryRunOfMultiNodeBackendsPrintsTheExactCommands) {
  std::ofstream(dir / "hostfile") << "127.0.0.1 slots=2\n127.0.0.2 slots=2\n";
  std::string common = " launch --dry_run -H " + (dir / "hostfile") + " --master_port 1234 ";
  auto r = run_command(std::string("cd ") + dir.path() + " && env -i PATH=/usr/bin:/bin NCCL_X='a b' " + DSX_EXE + common +
                       "--launcher pdsh train.py --lr 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "pdsh: PDSH_RCMD_TYPE=ssh pdsh -S -f 1024 -w 127.0.0.1,127.0.0.2 ");
  EXPECT_CONTAINS(r.output, "--node_rank=%n");
  EXPECT_NE(r.output.find("node 1 (127.0.0.2): export NCCL_X='a b'; export PYTHONPATH=" + dir.path() + "; cd " + dir.path() +
                          " && exec "),
            std::string::npos)
      << r.output;
  EXPECT_CONTAINS(r.output, " --node_rank=1 --master_addr=127.0.0.1 --master_port=1234 ");
  EXPECT_CONTAINS(r.output, " train.py --lr 1\n");
  r = run_command(std::string("cd ") + dir.path() + " && " + DSX_EXE + common + "--launcher slurm train.py");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("srun -n 4 --nodes=2 --ntasks-per-node=2 --nodelist=127.0.0.1,127.0.0.2 --kill-on-bad-exit=1 --export=ALL "),
            std::string::npos)
      << r.output;
  EXPECT_CONTAINS(r.output, " launch --dsx_rank_shim --kill_grace_s=30 train.py");
}

TEST_F(LocalLaunch, PythonScriptRunsUnderPythonWithLocalRank) {
  if (!exists("/usr/bin/python3")) GTEST_SKIP() << "python3 is not installed";
  std::ofstream(dir / "probe.py") << "import os, sys\n"
                                     "open(os.path.join(os.environ['DSX_TEST_OUT'], 'py%s' % os.environ['RANK']), 'w')"
                                     ".write(' '.join(sys.argv[1:]) + '|' + os.environ['LOCAL_WORLD_SIZE'])\n";
  auto r = run_command("DSX_TEST_OUT=" + dir.path() + " " + DSX_EXE + " launch --num_gpus 2 --master_port " + std::to_string(port) +
                       " " + (dir / "probe.py") + " --epochs 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_text(dir / "py1"), "--local_rank=1 --epochs 1|2");
}

TEST_F(LocalLaunch, BadLogLevelIsAUsageError) {
  auto r = run_dsx("launch --log_level loud x.py");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_CONTAINS(r.output, "--log_level 'loud'");
}

TEST_F(LocalLaunch, ElasticIsRejectedAndAutotuningOnlyTunesDsxTrain) {
  auto r = run_dsx("launch --elastic_training --master_addr 127.0.0.1 x.py");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("elastic training"), std::string::npos);
  // --autotuning runs dsx autotune (tests/tools/test_autotune_cli.cpp), which tunes dsx train jobs.
  r = run_dsx("launch --autotuning tune x.py");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_CONTAINS(r.output, "tunes a `dsx train` job");
}

// `dsx launch ... dsx <command>` from a build tree, where no `dsx` is on PATH: the ranks run the
// launcher's own binary (not `python -u dsx`).
TEST_F(LocalLaunch, DsxWithoutDsxOnPathRunsTheLaunchersOwnBinary) {
  auto r = run_command("env PATH=/usr/bin:/bin " + std::string(DSX_EXE) + " launch --num_gpus 2 --master_port " +
                       std::to_string(port) + " dsx version");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "[rank0]: dsx ");
  EXPECT_CONTAINS(r.output, "[rank1]: dsx ");
}

// Spellings DeepSpeed's argparse takes: --num_accelerators (its other name for --num_gpus),
// unique prefixes of long flags, `--include=` (empty: no filter) and spaces around a slot number.
TEST_F(LocalLaunch, FlagSpellingsDeepSpeedAcceptsAreAccepted) {
  const std::string launch = std::string(DSX_EXE) + " launch --dry_run --master_port 1234 ";
  const std::string two_ranks = "rank 1: MASTER_ADDR=127.0.0.1 MASTER_PORT=1234 WORLD_SIZE=2 ";
  for (const char* flags : {"--num_accelerators 2", "--num_gpu 2", "--num_gpus=2 --include="}) {
    auto r = run_command(launch + flags + " train.py");
    EXPECT_EQ(r.exit_code, 0) << flags << "\n" << r.output;
    EXPECT_NE(r.output.find(two_ranks), std::string::npos) << flags << "\n" << r.output;
  }
  auto program_args = run_command(launch + "--num_gpus 1 train.py --out= x");  // the program's words stay
  EXPECT_CONTAINS(program_args.output, " train.py --local_rank=0 --out= x\n");
  auto addr = run_command(launch + "--num_gpus 1 --master_add 10.1.2.3 train.py");
  EXPECT_CONTAINS(addr.output, "MASTER_ADDR=10.1.2.3");
  auto ambiguous = run_command(launch + "--num 2 train.py");
  EXPECT_EQ(ambiguous.exit_code, 2) << ambiguous.output;
  EXPECT_CONTAINS(ambiguous.output, "'--num' is ambiguous");
  std::ofstream(dir / "hostfile") << "127.0.0.1 slots=4\n";
  auto spaced = run_command(launch + "-H " + (dir / "hostfile") + " -i \"127.0.0.1: 1, 3\" train.py");
  EXPECT_EQ(spaced.exit_code, 0) << spaced.output;
  EXPECT_CONTAINS(spaced.output, "CUDA_VISIBLE_DEVICES=1,3");
}

// A rank killed before it closes its libfabric shm endpoint leaves /dev/shm/<pid>:0:0 (16 MiB
// each): the launcher removes it once the rank is reaped.
TEST_F(LocalLaunch, AKilledRanksShmRegionIsRemoved) {
  std::vector<std::string> e = env("shm_selfkill");
  e.push_back("DSX_TEST_SHM=/dev/shm");
  Background run(launch({"--num_gpus", "1"}), e, dir / "launch.out");
  EXPECT_EQ(run.wait(30), 128 + SIGKILL) << output();
  const std::string pid = read_text(dir / "rank0.pid").substr(0, read_text(dir / "rank0.pid").find('\n'));
  ASSERT_FALSE(pid.empty());
  EXPECT_FALSE(exists("/dev/shm/" + pid + ":0:0")) << "the killed rank's region is left behind";
}

// At start-up the launcher removes this user's regions whose process is gone, and no other.
TEST_F(LocalLaunch, StartUpRemovesTheRegionsOfDeadProcessesOnly) {
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ::waitpid(dead, nullptr, 0);
  const std::string stale = "/dev/shm/" + std::to_string(dead) + ":7:7";
  const std::string live = "/dev/shm/" + std::to_string(::getpid()) + ":7:7";
  std::ofstream(stale) << "x";
  std::ofstream(live) << "x";
  Background run(launch({"--num_gpus", "1"}), env("ok"), dir / "launch.out");
  EXPECT_EQ(run.wait(30), 0) << output();
  EXPECT_FALSE(exists(stale));
  EXPECT_TRUE(exists(live)) << "a living process's region must stay";
  std::remove(live.c_str());
  std::remove(stale.c_str());
}

// A second Ctrl-C kills at once and says so, without claiming the grace period has passed.
TEST_F(LocalLaunch, ASecondInterruptKillsAtOnceAndSaysWhy) {
  Background run(launch({"--num_gpus", "2"}), env("ignore_stops"), dir / "launch.out");
  ASSERT_TRUE(wait_for([&] { return exists(dir / "rank0.pid") && exists(dir / "rank1.pid"); }, 20)) << output();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // traps installed
  run.signal(SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  run.signal(SIGINT);
  EXPECT_EQ(run.wait(10), 128 + SIGINT) << output();
  EXPECT_NE(output().find("still running; sending SIGKILL (second Interrupt)"), std::string::npos) << output();
  EXPECT_EQ(output().find("still running after"), std::string::npos) << output();
}

// A launcher message (here: Ctrl-C) while a rank's progress bar is mid-line gets a line of its
// own instead of being glued to the bar.
TEST_F(LocalLaunch, AMessageNeverLandsInsideAProgressBarLine) {
  Background run(launch({"--num_gpus", "1"}), env("bar"), dir / "launch.out");
  ASSERT_TRUE(wait_for([&] { return output().find("step 1 of 2") != std::string::npos; }, 20)) << output();
  run.signal(SIGINT);
  run.wait(20);
  const std::string out = output();
  const size_t message = out.find("dsx launch: received Interrupt");
  ASSERT_NE(message, std::string::npos) << out;
  ASSERT_GT(message, 0u);
  EXPECT_EQ(out[message - 1], '\n') << "the message shares the bar's line:\n" << out;
}
