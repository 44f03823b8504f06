// Command shapes of the multi-node backends (ref/launcher.md 4.5) as --dry_run shows them.
#include <gtest/gtest.h>

#include "dsx/error.h"
#include "launcher/backend_command.h"
#include "launcher/shell_words.h"
#include "launcher/world_info.h"

using namespace dsx::launcher;

namespace {

RemoteJob job(const std::string& launcher) {
  RemoteJob j;
  j.world = {{"n0", {0, 1}}, {"n1", {0, 1}}};
  j.master_addr = "10.0.0.1";
  j.exports = {{"NCCL_DEBUG", "INFO"}, {"PYTHONPATH", "/work dir"}};
  j.cwd = "/work dir";
  j.dsx_path = "/opt/dsx";
  j.hostfile = "/job/hostfile";
  j.runner_pid = 42;
  j.options.launcher = launcher;
  j.options.user_script = "train.py";
  j.options.user_args = {"--cfg", "a b"};
  return j;
}

bool has(const std::vector<std::string>& argv, const std::vector<std::string>& seq) {
  return std::search(argv.begin(), argv.end(), seq.begin(), seq.end()) != argv.end();
}

}  // namespace

TEST(BackendCommand, PdshRunsTetheredAgentsWithNodeIndex) {
  auto j = job("pdsh");
  j.options.launcher_args = "-R ssh";
  j.options.venv_script = "/v/activate";
  auto c = pdsh_command(j);
  EXPECT_EQ(std::vector<std::string>(c.argv.begin(), c.argv.begin() + 8),
            (std::vector<std::string>{"pdsh", "-S", "-f", "1024", "-w", "n0,n1", "-R", "ssh"}));
  const std::string& remote = c.argv.back();
  EXPECT_EQ(remote.rfind("source /v/activate; export NCCL_DEBUG=INFO; export PYTHONPATH='/work dir'; cd '/work dir' && exec /opt/dsx launch", 0), 0u)
      << remote;
  EXPECT_NE(remote.find(" --node_rank=%n "), std::string::npos);
  EXPECT_NE(remote.find("--world_info=" + encode_world_info(j.world)), std::string::npos);
  EXPECT_NE(remote.find("--dsx_tether=parent train.py --cfg 'a b'"), std::string::npos) << remote;
  EXPECT_NE(remote.find("--enable_each_rank_log=None"), std::string::npos);
  EXPECT_EQ(c.env, (std::vector<EnvVar>{{"PDSH_RCMD_TYPE", "ssh"}}));
}

TEST(BackendCommand, AgentForwardsEveryPerNodeOption) {
  auto j = job("ssh");
  j.options.no_python = true;
  j.options.no_local_rank = true;
  j.options.save_pid = true;
  j.options.enable_each_rank_log = "/logs";
  j.options.bind_cores_to_rank = true;
  j.options.bind_core_list = "0-3";
  j.options.quiet = true;
  auto a = agent_argv(j, "1", "stdin");
  for (const std::vector<std::string>& want :
       {std::vector<std::string>{"--no_python"}, {"--no_local_rank"}, {"--save_pid", "42"}, {"--enable_each_rank_log=/logs"},
        {"--bind_cores_to_rank"}, {"--bind_core_list=0-3"}, {"--log_level=error"}, {"--node_rank=1"},
        {"--master_addr=10.0.0.1"}, {"--master_port=29500"}}) {
    EXPECT_TRUE(has(a, want)) << want[0];
  }
}

TEST(BackendCommand, SshOneCommandPerNodeWithPortAndOptions) {
  auto j = job("ssh");
  j.options.ssh_port = 2222;
  j.options.launcher_args = "-F '/my cfg'";
  auto cs = ssh_commands(j);
  ASSERT_EQ(cs.size(), 2u);
  EXPECT_EQ(cs[1].node, "n1");
  EXPECT_TRUE(has(cs[1].argv, {"ssh", "-o", "BatchMode=yes", "-p", "2222", "-F", "/my cfg", "n1"}));
  EXPECT_NE(cs[1].argv.back().find("--node_rank=1 "), std::string::npos);
  EXPECT_NE(cs[1].argv.back().find("--dsx_tether=stdin"), std::string::npos);
}

TEST(BackendCommand, OpenMpiHonoursFiltersAndAddsNoNic) {
  auto j = job("openmpi");
  j.world = {{"n0", {1}}, {"n1", {0, 1, 2}}};
  j.options.launcher_args = "--mca btl_tcp_if_include lo";
  auto c = mpi_command(j);
  EXPECT_TRUE(has(c.argv, {"mpirun", "-n", "4", "--host", "n0:1,n1:3", "--mca", "btl", "^openib", "--mca", "btl_tcp_if_include", "lo"}));
  EXPECT_TRUE(has(c.argv, {"-x", "PYTHONPATH=/work dir"}));  // raw value: no shell reads it
  EXPECT_TRUE(has(c.argv, {"-x", "MASTER_ADDR=10.0.0.1"}));
  EXPECT_TRUE(has(c.argv, {"-x", "UCX_TLS=tcp"}));
  EXPECT_TRUE(has(c.argv, {"/opt/dsx", "launch", "--dsx_rank_shim"}));
  EXPECT_FALSE(has(c.argv, {"eth0"}));
  EXPECT_EQ(c.argv.back(), "a b");
}

TEST(BackendCommand, MpichImpiMvapichNeedEqualSlots) {
  auto j = job("mpich");
  auto c = mpi_command(j);
  EXPECT_TRUE(has(c.argv, {"mpirun", "-n", "4", "-ppn", "2"}));
  EXPECT_TRUE(has(c.argv, {"-genv", "WORLD_SIZE", "4"}));
  EXPECT_TRUE(has(c.argv, {"-hosts", "n0,n1"}));
  j.options.launcher = "impi";
  EXPECT_TRUE(has(mpi_command(j).argv, {"-genv", "I_MPI_PIN", "0"}));
  j.options.launcher = "mvapich";
  EXPECT_TRUE(has(mpi_command(j).argv, {"-env", "MV2_SMP_USE_CMA=0"}));
  j.world[1].slots = {0};
  EXPECT_THROW(mpi_command(j), dsx::Error);
  j.options.launcher = "bogus";
  j.world[1].slots = {0, 1};
  EXPECT_THROW(mpi_command(j), dsx::Error);
}

TEST(BackendCommand, SlurmUsesNodelistAndCountsFromTheActiveWorld) {
  auto j = job("slurm");
  j.options.launcher_args = "--partition debug";
  auto c = slurm_command(j);
  EXPECT_EQ(std::vector<std::string>(c.argv.begin(), c.argv.begin() + 10),
            (std::vector<std::string>{"srun", "-n", "4", "--nodes=2", "--ntasks-per-node=2", "--nodelist=n0,n1",
                                      "--kill-on-bad-exit=1", "--partition", "debug", "--export=ALL"}));
  EXPECT_TRUE(has(c.argv, {"/opt/dsx", "launch", "--dsx_rank_shim"}));
  EXPECT_EQ(display_command(c).rfind("NCCL_DEBUG=INFO PYTHONPATH='/work dir' MASTER_ADDR=10.0.0.1 MASTER_PORT=29500 srun", 0), 0u)
      << display_command(c);
}

// The store secret is on no backend's command line: by name for the schedulers, in stdin for the
// ssh fan-out, in ssh's LC_ environment for pdsh.
TEST(BackendCommand, TheStoreSecretIsPassedOffTheCommandLine) {
  const std::string secret = "0123456789abcdef0123456789abcdef";
  auto with_secret = [&](const std::string& launcher) {
    RemoteJob j = job(launcher);
    j.exports.emplace_back("DSX_STORE_SECRET", secret);
    return j;
  };
  auto nowhere = [&](const BackendCommand& c, const std::string& what) {
    for (const auto& word : c.argv) EXPECT_EQ(word.find(secret), std::string::npos) << what << ": " << word;
  };
  auto value_in_env = [&](const BackendCommand& c, const std::string& name) {
    for (const auto& [k, v] : c.env) {
      if (k == name) return v == secret;
    }
    return false;
  };
  const BackendCommand openmpi = mpi_command(with_secret("openmpi"));
  nowhere(openmpi, "openmpi");
  EXPECT_TRUE(has(openmpi.argv, {"-x", "DSX_STORE_SECRET"}));
  EXPECT_TRUE(value_in_env(openmpi, "DSX_STORE_SECRET"));
  for (const char* hydra : {"mpich", "impi", "mvapich"}) {
    const BackendCommand c = mpi_command(with_secret(hydra));
    nowhere(c, hydra);
    EXPECT_TRUE(has(c.argv, {"-genvlist", "DSX_STORE_SECRET"})) << hydra;
    EXPECT_TRUE(value_in_env(c, "DSX_STORE_SECRET")) << hydra;
  }
  const BackendCommand slurm = slurm_command(with_secret("slurm"));
  nowhere(slurm, "slurm");
  EXPECT_TRUE(value_in_env(slurm, "DSX_STORE_SECRET"));
  const BackendCommand pdsh = pdsh_command(with_secret("pdsh"));
  nowhere(pdsh, "pdsh");
  EXPECT_TRUE(value_in_env(pdsh, "LC_DSX_STORE_SECRET"));
  for (const BackendCommand& c : ssh_commands(with_secret("ssh"))) {
    nowhere(c, "ssh");
    EXPECT_EQ(c.stdin_text, secret + "\n");
  }
}

// --dry_run prints the environment a backend gets, but not the secret in it: the output lands in
// terminals, logs and issue reports.
TEST(BackendCommand, DryRunMasksTheStoreSecret) {
  const std::string secret = "0123456789abcdef0123456789abcdef";
  for (const char* launcher : {"pdsh", "openmpi", "mpich", "slurm"}) {
    RemoteJob j = job(launcher);
    j.exports.emplace_back("DSX_STORE_SECRET", secret);
    const BackendCommand c = std::string(launcher) == "pdsh"    ? pdsh_command(j)
                             : std::string(launcher) == "slurm" ? slurm_command(j)
                                                                : mpi_command(j);
    const std::string shown = display_command(c);
    EXPECT_EQ(shown.find(secret), std::string::npos) << launcher << ": " << shown;
    EXPECT_NE(shown.find("DSX_STORE_SECRET=<hidden>"), std::string::npos) << launcher << ": " << shown;
  }
}
