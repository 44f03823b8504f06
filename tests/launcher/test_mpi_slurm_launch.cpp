// The scheduler backends for real: OpenMPI's mpirun (openmpi runner) and a single-node Slurm
// cluster (slurmctld + slurmd with auth/none, started by the test on free ports) behind srun.
// Ranks get the DeepSpeed/torchrun environment from the rank shim, and a failing rank's exit
// code is the launch's exit code.
#include "launcher/process.h"
#include "tests/launcher/launch_test_util.h"
#include "tests/tools/run_command.h"

using namespace dsx::test;

namespace {

class SchedulerLaunch : public testing::Test {
 protected:
  ScratchDir dir;
  std::string out;

  void SetUp() override {
    out = dir / "out";
    std::filesystem::create_directories(out);
  }
  std::vector<std::string> env(const std::string& mode, int rank = -1, int code = 0) const {
    return {"DSX_TEST_OUT=" + out, "DSX_TEST_MODE=" + mode, "DSX_TEST_RANK=" + std::to_string(rank),
            "DSX_TEST_CODE=" + std::to_string(code), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};
  }
  std::string output() const { return read_text(dir / "launch.out"); }
  std::string rank_file(int r, const std::string& ext) const { return out + "/rank" + std::to_string(r) + "." + ext; }
  std::string hostfile(const std::string& text) const {
    std::ofstream(dir / "hostfile") << text;
    return dir / "hostfile";
  }
  void expect_ranks(int n) {
    for (int r = 0; r < n; ++r) {
      auto e = read_env(rank_file(r, "env"));
      EXPECT_EQ(e["RANK"], std::to_string(r));
      EXPECT_EQ(e["LOCAL_RANK"], std::to_string(r));
      EXPECT_EQ(e["WORLD_SIZE"], std::to_string(n));
      EXPECT_EQ(e["LOCAL_WORLD_SIZE"], std::to_string(n));
      EXPECT_EQ(e["NODE_RANK"], "0");
      EXPECT_EQ(e["MASTER_ADDR"], "127.0.0.1");
      // The job's store secret arrives by name, through the scheduler's environment.
      EXPECT_EQ(e["DSX_STORE_SECRET"].size(), 32u);
      EXPECT_EQ(e["DSX_STORE_SECRET"], read_env(rank_file(0, "env"))["DSX_STORE_SECRET"]);
      EXPECT_EQ(read_text(rank_file(r, "args")), "--local_rank=" + std::to_string(r) + "\nq\n");
      EXPECT_NE(output().find("[rank" + std::to_string(r) + "]: rank " + std::to_string(r) + " says hello"), std::string::npos) << output();
    }
  }
};

TEST_F(SchedulerLaunch, OpenMpiRunnerGivesRanksTheirEnvironment) {
  if (!exists("/usr/bin/mpirun")) GTEST_SKIP() << "mpirun is not installed (Debian package openmpi-bin)";
  Background run({DSX_EXE, "launch", "-H", hostfile("localhost slots=3\n"), "--force_multi", "--launcher", "openmpi",
                  "--launcher_args", "--oversubscribe", "--master_port", std::to_string(free_port()), probe_script(), "q"},
                 env("ok"), dir / "launch.out");
  ASSERT_EQ(run.wait(60), 0) << output();
  expect_ranks(3);
  EXPECT_EQ(read_env(rank_file(1, "env"))["OMPI_COMM_WORLD_RANK"], "1");
}

TEST_F(SchedulerLaunch, OpenMpiFailingRankStopsTheJobWithItsExitCode) {
  if (!exists("/usr/bin/mpirun")) GTEST_SKIP() << "mpirun is not installed (Debian package openmpi-bin)";
  Background run({DSX_EXE, "launch", "-H", hostfile("localhost slots=2\n"), "--force_multi", "--launcher", "openmpi",
                  "--master_port", std::to_string(free_port()), probe_script(), "q"},
                 env("fail", 1, 7), dir / "launch.out");
  ASSERT_EQ(run.wait(60), 7) << output();
  // Rank 0 is stopped; whether by SIGTERM or SIGKILL is mpirun's choice (Debian's OpenMPI 4.1
  // sometimes crashes in PMIx_Finalize while aborting and its daemon kills the rest).
  EXPECT_FALSE(process_alive(read_pid(rank_file(0, "pid"))));
  expect_nothing_left("DSX_TEST_OUT=" + out);
}

// --max_restarts under mpirun: a rank killed with kill -9 from outside stops the job, and the runner
// starts every rank again with the next TORCHELASTIC_RESTART_COUNT (sleep_first ends at once then).
TEST_F(SchedulerLaunch, OpenMpiJobRestartsAfterARankIsKilled) {
  if (!exists("/usr/bin/mpirun")) GTEST_SKIP() << "mpirun is not installed (Debian package openmpi-bin)";
  Background run({DSX_EXE, "launch", "-H", hostfile("localhost slots=2\n"), "--force_multi", "--launcher", "openmpi",
                  "--master_port", std::to_string(free_port()), "--max_restarts", "1", probe_script(), "q"},
                 env("sleep_first"), dir / "launch.out");
  ASSERT_TRUE(wait_for([&] { return exists(rank_file(1, "pid")); }, 30)) << output();
  ASSERT_TRUE(wait_for([&] { return read_env(rank_file(1, "env")).count("RANK") > 0; }, 5));
  const pid_t killed = read_pid(rank_file(1, "pid"));
  ASSERT_EQ(::kill(killed, SIGKILL), 0);
  ASSERT_EQ(run.wait(60), 0) << output();
  EXPECT_NE(output().find("restarting the job (restart 1 of 1)"), std::string::npos) << output();
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(read_env(rank_file(r, "env"))["TORCHELASTIC_RESTART_COUNT"], "1") << "rank " << r;
  EXPECT_FALSE(process_alive(killed));
  expect_nothing_left("DSX_TEST_OUT=" + out);
}

// slurmctld and slurmd for one node named dsxnode at 127.0.0.1, no munge (auth/none, cred/none).
class SlurmLaunch : public SchedulerLaunch {
 protected:
  std::unique_ptr<Background> controller, node;
  std::string conf;

  void SetUp() override {
    SchedulerLaunch::SetUp();
    for (const char* tool : {"/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/srun", "/usr/bin/sinfo"}) {
      if (!exists(tool)) GTEST_SKIP() << tool << " is not installed (Debian package slurm-wlm)";
    }
    if (::geteuid() != 0) GTEST_SKIP() << "slurmd must run as root to start job steps";
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    conf = dir / "slurm.conf";
    std::filesystem::create_directories(dir / "state");
    std::filesystem::create_directories(dir / "spool");
    std::ofstream(conf) << "ClusterName=dsxtest\nSlurmctldHost=localhost(127.0.0.1)\n"
                        << "SlurmctldPort=" << free_port() << "\nSlurmdPort=" << free_port() << "\n"
                        << "AuthType=auth/none\nCredType=cred/none\nSlurmUser=root\nSlurmdUser=root\n"
                        << "StateSaveLocation=" << (dir / "state") << "\nSlurmdSpoolDir=" << (dir / "spool") << "\n"
                        << "SlurmctldPidFile=" << (dir / "slurmctld.pid") << "\nSlurmdPidFile=" << (dir / "slurmd.pid") << "\n"
                        << "ProctrackType=proctrack/pgid\nTaskPlugin=task/none\nSelectType=select/cons_tres\n"
                        << "SelectTypeParameters=CR_Core\nSwitchType=switch/none\nMpiDefault=none\nReturnToService=2\n"
                        << "SchedulerType=sched/builtin\nJobCompType=jobcomp/none\nAccountingStorageType=accounting_storage/none\n"
                        << "SlurmctldTimeout=10\nSlurmdTimeout=10\nInactiveLimit=0\nKillWait=5\n"
                        << "NodeName=dsxnode NodeHostname=" << host << " NodeAddr=127.0.0.1 CPUs=2 RealMemory=500 State=UNKNOWN\n"
                        << "PartitionName=debug Nodes=dsxnode Default=YES MaxTime=INFINITE State=UP\n";
    std::vector<std::string> conf_env = {"SLURM_CONF=" + conf};
    controller = std::make_unique<Background>(std::vector<std::string>{"/usr/sbin/slurmctld", "-D", "-i", "-f", conf}, conf_env,
                                               dir / "slurmctld.log");
    node = std::make_unique<Background>(std::vector<std::string>{"/usr/sbin/slurmd", "-D", "-f", conf, "-N", "dsxnode"}, conf_env,
                                        dir / "slurmd.log");
    bool idle = wait_for([&] {
      return run_command("SLURM_CONF=" + conf + " sinfo -h -N -o %t").output.find("idle") != std::string::npos;
    }, 20);
    ASSERT_TRUE(idle) << "Slurm did not come up within 20 s\nslurmctld:\n" << read_text(dir / "slurmctld.log")
                      << "\nslurmd:\n" << read_text(dir / "slurmd.log");
  }

  void TearDown() override {
    for (auto* daemon : {node.get(), controller.get()}) {
      if (daemon && daemon->pid() > 0) {
        daemon->signal(SIGTERM);
        if (daemon->wait(10) < 0) dsx::launcher::signal_tree(daemon->pid(), SIGKILL);
      }
    }
    node.reset();
    controller.reset();
  }

  std::vector<std::string> slurm_env(const std::string& mode, int rank = -1, int code = 0) const {
    auto e = env(mode, rank, code);
    e.push_back("SLURM_CONF=" + conf);
    return e;
  }
};

TEST_F(SlurmLaunch, SrunGivesRanksTheirEnvironment) {
  Background run({DSX_EXE, "launch", "-H", hostfile("dsxnode slots=2\n"), "--force_multi", "--launcher", "slurm", "--master_addr",
                  "127.0.0.1", "--master_port", std::to_string(free_port()), probe_script(), "q"},
                 slurm_env("ok"), dir / "launch.out");
  ASSERT_EQ(run.wait(60), 0) << output();
  expect_ranks(2);
  EXPECT_FALSE(read_env(rank_file(0, "env"))["SLURM_JOB_ID"].empty());
}

TEST_F(SlurmLaunch, FailingRankStopsTheStepWithItsExitCode) {
  Background run({DSX_EXE, "launch", "-H", hostfile("dsxnode slots=2\n"), "--force_multi", "--launcher", "slurm", "--master_addr",
                  "127.0.0.1", "--master_port", std::to_string(free_port()), probe_script(), "q"},
                 slurm_env("fail", 1, 7), dir / "launch.out");
  ASSERT_EQ(run.wait(60), 7) << output();
  EXPECT_TRUE(wait_for([&] { return !process_alive(read_pid(rank_file(0, "pid"))); }, 10)) << output();
  expect_nothing_left("DSX_TEST_OUT=" + out);
}

// The same under srun: the runner's restart is a new job step with the next restart count.
TEST_F(SlurmLaunch, SrunJobRestartsAfterARankIsKilled) {
  Background run({DSX_EXE, "launch", "-H", hostfile("dsxnode slots=2\n"), "--force_multi", "--launcher", "slurm", "--master_addr",
                  "127.0.0.1", "--master_port", std::to_string(free_port()), "--max_restarts", "1", probe_script(), "q"},
                 slurm_env("sleep_first"), dir / "launch.out");
  ASSERT_TRUE(wait_for([&] { return exists(rank_file(1, "pid")); }, 30)) << output();
  const pid_t killed = read_pid(rank_file(1, "pid"));
  ASSERT_EQ(::kill(killed, SIGKILL), 0);
  ASSERT_EQ(run.wait(60), 0) << output();
  EXPECT_NE(output().find("restarting the job (restart 1 of 1)"), std::string::npos) << output();
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(read_env(rank_file(r, "env"))["TORCHELASTIC_RESTART_COUNT"], "1") << "rank " << r;
  expect_nothing_left("DSX_TEST_OUT=" + out);
}

}  // namespace
