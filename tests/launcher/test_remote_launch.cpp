// Two "nodes" (127.0.0.1 and 127.0.0.2) behind a real sshd: launches through dsx's ssh fan-out
// and through pdsh, cross-node fail-fast, Ctrl-C and a killed runner reaching remote ranks, and
// the errors for unreachable, unresolvable and missing tools.
#include "dsx/error.h"
#include "launcher/preflight.h"
#include "tests/launcher/sshd_fixture.h"
#include "tests/tools/process_table.h"

using namespace dsx::test;

namespace {

class RemoteLaunch : public SshdFixture {
 protected:
  std::string out;  // where the ranks record themselves (same filesystem on both "nodes")

  void SetUp() override {
    SshdFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    out = dir / "out";
    std::filesystem::create_directories(out);
  }

  std::vector<std::string> env(const std::string& mode, int rank = -1, int code = 0) const {
    return {"DSX_TEST_OUT=" + out, "DSX_TEST_MODE=" + mode, "DSX_TEST_RANK=" + std::to_string(rank),
            "DSX_TEST_CODE=" + std::to_string(code), "PDSH_SSH_ARGS_APPEND=-F " + client_config,
            "NCCL_DSX_HOSTILE=a'b $(touch " + dir.path() + "/pwned) \"q\" `id`"};
  }
  std::vector<std::string> launch(const std::string& launcher, const std::vector<std::string>& more = {}) {
    std::vector<std::string> argv = {DSX_EXE, "launch", "-H", write_hostfile("127.0.0.1 slots=2\n127.0.0.2 slots=2\n"),
                                     "--launcher", launcher, "--master_port", std::to_string(free_port()), "--kill_grace_s", "3"};
    if (launcher == "ssh") argv.insert(argv.end(), {"--launcher_args", "-F " + client_config});
    argv.insert(argv.end(), more.begin(), more.end());
    argv.push_back(probe_script());
    argv.push_back("x y");
    argv.push_back(hostile_arg());
    return argv;
  }
  std::string hostile_arg() const { return "$(touch " + dir.path() + "/pwned) `id` 'q' \"d\" ;|&"; }
  std::string output() const { return read_text(dir / "launch.out"); }
  std::string rank_file(int r, const std::string& ext) const { return out + "/rank" + std::to_string(r) + "." + ext; }
  // Ranks start on their own schedule: wait for all four, not the first and the last.
  bool every_rank_wrote(const std::string& ext) const {
    return wait_for([&] {
      for (int r = 0; r < 4; ++r)
        if (!exists(rank_file(r, ext))) return false;
      return true;
    }, 30);
  }

  void expect_two_node_world() {
    for (int r = 0; r < 4; ++r) {
      auto e = read_env(rank_file(r, "env"));
      EXPECT_EQ(e["RANK"], std::to_string(r));
      EXPECT_EQ(e["LOCAL_RANK"], std::to_string(r % 2));
      EXPECT_EQ(e["WORLD_SIZE"], "4");
      EXPECT_EQ(e["NODE_RANK"], std::to_string(r / 2));
      EXPECT_EQ(e["CROSS_SIZE"], "2");
      EXPECT_EQ(e["CUDA_VISIBLE_DEVICES"], "0,1");
      EXPECT_EQ(e["MASTER_ADDR"], "127.0.0.1");
      std::istringstream connection(e["SSH_CONNECTION"]);  // client_ip client_port server_ip server_port
      std::string client_ip, client_port, server_ip;
      connection >> client_ip >> client_port >> server_ip;
      EXPECT_EQ(server_ip, r < 2 ? "127.0.0.1" : "127.0.0.2") << "rank " << r << " did not run on its node";
      EXPECT_EQ(e["NCCL_DSX_HOSTILE"], "a'b $(touch " + dir.path() + "/pwned) \"q\" `id`");
      EXPECT_EQ(e["FROM_DEEPSPEED_ENV"], "yes it is");
      EXPECT_EQ(read_text(rank_file(r, "args")), "--local_rank=" + std::to_string(r % 2) + "\nx y\n" + hostile_arg() + "\n");
    }
    EXPECT_FALSE(exists(dir / "pwned")) << "an exported value or an argument ran a command on a node";
  }

  void expect_all_ranks_gone() {
    expect_nothing_left("DSX_TEST_OUT=" + out);
    for (int r = 0; r < 4; ++r) {
      if (!exists(rank_file(r, "pid"))) continue;
      pid_t pid = read_pid(rank_file(r, "pid"));
      EXPECT_TRUE(wait_for([&] { return !process_alive(pid); }, 10)) << "rank " << r << " (pid " << pid << ") left running";
    }
  }
};

}  // namespace

TEST_F(RemoteLaunch, SshFanOutStartsBothNodesWithEnvironmentAndEnvFile) {
  std::ofstream(dir / ".deepspeed_env") << "# exported to every node\nFROM_DEEPSPEED_ENV = yes it is\n";
  std::ofstream(dir / "venv script.sh") << "export FROM_VENV_SCRIPT=sourced\n";
  Background run(launch("ssh", {"--venv_script", dir / "venv script.sh"}), env("ok"), dir / "launch.out", dir.path());
  ASSERT_EQ(run.wait(60), 0) << output();
  expect_two_node_world();
  EXPECT_EQ(read_env(rank_file(3, "env"))["FROM_VENV_SCRIPT"], "sourced");
  EXPECT_NE(output().find("127.0.0.2: [rank3]: rank 3 says hello"), std::string::npos) << output();
}

TEST_F(RemoteLaunch, PdshStartsBothNodesWithEnvironmentAndEnvFile) {
  if (!exists("/usr/bin/pdsh")) GTEST_SKIP() << "pdsh is not installed (Debian package pdsh)";
  std::ofstream(dir / ".deepspeed_env") << "FROM_DEEPSPEED_ENV=yes it is\n";
  Background run(launch("pdsh"), env("ok"), dir / "launch.out", dir.path());
  ASSERT_EQ(run.wait(60), 0) << output();
  expect_two_node_world();
  EXPECT_NE(output().find("127.0.0.2: [rank2]: rank 2 says hello"), std::string::npos) << output();
}

// The job's store secret reaches every rank on every node but no process's command line, where
// `ps` shows it to every user of the node.
class RemoteSecret : public RemoteLaunch, public ::testing::WithParamInterface<const char*> {};

TEST_P(RemoteSecret, TheStoreSecretIsOnNoCommandLine) {
  const std::string launcher = GetParam();
  if (launcher == "pdsh" && !exists("/usr/bin/pdsh")) GTEST_SKIP() << "pdsh is not installed (Debian package pdsh)";
  const std::string secret = "5ecret" + std::to_string(::getpid()) + "f00dfacecafe";
  std::vector<std::string> e = env("sleep");
  e.push_back("DSX_STORE_SECRET=" + secret);
  Background run(launch(launcher), e, dir / "launch.out");
  ASSERT_TRUE(every_rank_wrote("env")) << output();
  for (pid_t pid : processes_mentioning(secret)) ADD_FAILURE() << "pid " << pid << " shows the secret: " << command_line_of(pid);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(read_env(rank_file(r, "env"))["DSX_STORE_SECRET"], secret) << "rank " << r;
  run.signal(SIGINT);
  run.wait(30);
  expect_all_ranks_gone();
}

INSTANTIATE_TEST_SUITE_P(Runners, RemoteSecret, ::testing::Values("ssh", "pdsh"));

TEST_F(RemoteLaunch, SshFailureOnOneNodeStopsTheOtherNode) {
  auto start = Clock::now();
  Background run(launch("ssh"), env("fail", 1, 9), dir / "launch.out");
  ASSERT_EQ(run.wait(60), 9) << output();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 30.0);
  for (int r : {0, 2, 3}) EXPECT_TRUE(exists(rank_file(r, "term"))) << "rank " << r << " was not stopped\n" << output();
  expect_all_ranks_gone();
}

// --max_restarts across nodes: node 1's rank 3 fails on the first start; the runner stops node 0
// too and starts both nodes again, whose ranks see TORCHELASTIC_RESTART_COUNT=1.
TEST_F(RemoteLaunch, SshFailureOnOneNodeRestartsBothNodes) {
  auto vars = env("fail_restarts", 3, 9);
  vars.push_back("DSX_TEST_UNTIL=1");
  Background run(launch("ssh", {"--max_restarts", "2"}), vars, dir / "launch.out");
  ASSERT_EQ(run.wait(60), 0) << output();
  EXPECT_NE(output().find("a rank failed with exit code 9; restarting the job (restart 1 of 2)"), std::string::npos) << output();
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(exists(rank_file(r, "started0")) && exists(rank_file(r, "started1"))) << "rank " << r << "\n" << output();
    expect_vars(read_env(rank_file(r, "env")), {{"TORCHELASTIC_RESTART_COUNT", "1"}, {"TORCHELASTIC_MAX_RESTARTS", "2"}},
                "rank " + std::to_string(r));
  }
  expect_all_ranks_gone();
}

TEST_F(RemoteLaunch, PdshFailureOnOneNodeStopsTheOtherNode) {
  if (!exists("/usr/bin/pdsh")) GTEST_SKIP() << "pdsh is not installed (Debian package pdsh)";
  Background run(launch("pdsh"), env("fail", 3, 9), dir / "launch.out");
  ASSERT_EQ(run.wait(60), 9) << output();
  for (int r : {0, 1, 2}) EXPECT_TRUE(wait_for([&] { return exists(rank_file(r, "term")); }, 10)) << "rank " << r << " was not stopped\n" << output();
  expect_all_ranks_gone();
}

TEST_F(RemoteLaunch, CtrlCAtTheRunnerStopsRemoteRanks) {
  Background run(launch("ssh"), env("sleep"), dir / "launch.out");
  ASSERT_TRUE(every_rank_wrote("pid")) << output();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  run.signal(SIGINT);
  EXPECT_EQ(run.wait(30), 130) << output();
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(exists(rank_file(r, "term"))) << "rank " << r << "\n" << output();
  expect_all_ranks_gone();
}

TEST_F(RemoteLaunch, KilledRunnerStillStopsRemoteRanks) {
  Background run(launch("ssh"), env("sleep"), dir / "launch.out");
  ASSERT_TRUE(every_rank_wrote("pid")) << output();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::kill(run.pid(), SIGKILL);
  EXPECT_EQ(run.wait(10), 128 + SIGKILL);
  expect_all_ranks_gone();
}

TEST_F(RemoteLaunch, UnreachableHostNamesHostAndPort) {
  int closed = free_port();
  auto r = run_command("DSX_TEST_OUT=" + out + " " + DSX_EXE + " launch -H " + write_hostfile("127.0.0.1 slots=1\n127.0.0.2 slots=1\n") +
                       " --launcher ssh --ssh_port " + std::to_string(closed) + " --launcher_args '-F " + client_config + "' " + probe_script());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("127.0.0.2 port " + std::to_string(closed) + ": "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Connection refused"), std::string::npos) << r.output;
  EXPECT_FALSE(exists(rank_file(0, "env")));
}

TEST_F(RemoteLaunch, UnresolvableHostIsNamed) {
  auto r = run_dsx("launch -H " + write_hostfile("127.0.0.1 slots=1\nno-such-node.invalid slots=1\n") + " --launcher ssh " + probe_script());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("these hosts do not resolve to an address:\n  no-such-node.invalid: "), std::string::npos) << r.output;
}

TEST_F(RemoteLaunch, MissingPdshIsAnErrorWhenAskedForAndAFallbackOtherwise) {
  std::filesystem::create_directories(dir / "bin");
  std::filesystem::create_symlink("/usr/bin/ssh", dir / "bin/ssh");
  std::string hostfile = write_hostfile("127.0.0.1 slots=1\n127.0.0.2 slots=1\n");
  auto r = run_command("PATH=" + (dir / "bin") + " " + DSX_EXE + " launch -H " + hostfile + " --launcher pdsh " + probe_script());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("launcher 'pdsh' not installed"), std::string::npos) << r.output;
  r = run_command("PATH=" + (dir / "bin") + " " + DSX_EXE + " launch --dry_run -H " + hostfile + " " + probe_script());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("pdsh is not installed; using dsx's built-in ssh fan-out"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("node 1 (127.0.0.2): ssh -o BatchMode=yes 127.0.0.2 "), std::string::npos) << r.output;
}

// DeepSpeed's `--autotuning tune` across two nodes: every trial is a real two-node job through
// ssh, on the user's master port (a free port cannot be picked for another node).
TEST_F(RemoteLaunch, AutotuningTunesATwoNodeJob) {
  std::ofstream(dir / "base.json") << R"({"train_batch_size": 16, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
    "zero_optimization": {"stage": 2},
    "autotuning": {"start_profile_step": 1, "end_profile_step": 2, "num_tuning_micro_batch_sizes": 1,
                   "results_dir": ")" << (dir / "results") << R"(", "exps_dir": ")" << (dir / "exps") << R"("}})";
  std::vector<std::string> argv = {DSX_EXE, "launch", "--autotuning", "tune", "-H",
                                   write_hostfile("127.0.0.1 slots=1\n127.0.0.2 slots=1\n"), "--launcher", "ssh",
                                   "--launcher_args", "-F " + client_config, "--master_port", std::to_string(free_port()),
                                   "dsx", "train", "--deepspeed_config", dir / "base.json", "--model", "byte-tiny"};
  Background run(argv, {"DSX_TEST_OUT=" + out, "DSX_DEVICE_MEMORY=4MB", "FI_TCP_IFACE=lo", "FI_SOCKETS_IFACE=lo", "OMP_NUM_THREADS=1"},
                 dir / "launch.out", dir.path());
  ASSERT_EQ(run.wait(300), 0) << output();
  EXPECT_NE(output().find("dsx autotune: 2 rank(s), global batch 16, ZeRO stage(s) 2"), std::string::npos) << output();
  const std::string probe = read_text(dir / "exps/z2_mbs1_mem/log.txt");
  EXPECT_NE(probe.find("127.0.0.2: "), std::string::npos) << "the trial did not run on the second node:\n" << probe;
  EXPECT_TRUE(exists(dir / "results/ds_config_optimal.json")) << output();
  expect_nothing_left("DSX_TEST_OUT=" + out);
}

// Without --master_addr, node 0 is asked for its own address over ssh ('hostname -I'), as
// DeepSpeed's runner does; the answer is an address node 0 has (read, never connected to here).
// A node that does not answer is a clear error asking for --master_addr. Loopback "nodes" keep
// their loopback address (every test launch above relies on it).
TEST_F(RemoteLaunch, MasterAddressIsAskedOfNodeZero) {
  const std::vector<std::string> opts = {"-o", "BatchMode=yes", "-F", client_config};
  const std::string addr = dsx::launcher::ask_master_addr("127.0.0.2", opts);
  unsigned char parsed[16];
  EXPECT_TRUE(::inet_pton(AF_INET, addr.c_str(), parsed) == 1 || ::inet_pton(AF_INET6, addr.c_str(), parsed) == 1)
      << addr;
  try {
    dsx::launcher::ask_master_addr("127.0.0.3", opts);  // no sshd there
    FAIL() << "an unreachable node 0 gave an address";
  } catch (const dsx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("pass --master_addr"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(dsx::launcher::is_loopback_host("127.0.0.2"));
  EXPECT_TRUE(dsx::launcher::is_loopback_host("localhost"));
  EXPECT_FALSE(dsx::launcher::is_loopback_host("worker-0"));
}
