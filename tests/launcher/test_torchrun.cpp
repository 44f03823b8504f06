// `dsx torchrun` with real processes on loopback: torchrun's flags and worker environment on one
// node; two "nodes" (two agents on this machine, by hand with --node_rank, through c10d, and as
// srun would start them) forming one job through the rendezvous; a failing rank restarting every
// node; a lost node ending the job at the join timeout; per-rank files; bad input.
#include <signal.h>

#include "tests/expect_contains.h"
#include "tests/launcher/launch_test_util.h"
#include "tests/tools/run_command.h"

using namespace dsx::test;

namespace {

struct Torchrun : testing::Test {
  ScratchDir dir;
  int port = free_port();

  std::vector<std::string> env(const std::string& mode, int rank = -1, int code = 0,
                               int until = 0) const {
    return {"DSX_TEST_OUT=" + dir.path(), "DSX_TEST_MODE=" + mode,
            "DSX_TEST_RANK=" + std::to_string(rank), "DSX_TEST_CODE=" + std::to_string(code),
            "DSX_TEST_UNTIL=" + std::to_string(until)};
  }
  // dsx torchrun FLAGS --no_python rank_probe.sh a "b c", its output in <name>.out.
  std::unique_ptr<Background> start(const std::vector<std::string>& flags,
                                    const std::vector<std::string>& vars,
                                    const std::string& name) const {
    std::vector<std::string> argv = {DSX_EXE, "torchrun"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"--no_python", probe_script(), "a", "b c"});
    return std::make_unique<Background>(argv, vars, dir / (name + ".out"));
  }
  std::string out(const std::string& name) const { return read_text(dir / (name + ".out")); }
  std::map<std::string, std::string> rank_env(int r) const {
    return read_env(dir / ("rank" + std::to_string(r) + ".env"));
  }
  // Two agents of a 2 x 2 job: node 1 first (it waits for node 0), then node 0; both exit codes.
  std::pair<int, int> two_nodes(const std::vector<std::string>& node0,
                                const std::vector<std::string>& node1,
                                const std::vector<std::string>& vars) const {
    auto second = start(node1, vars, "node1");
    auto first = start(node0, vars, "node0");
    const int code0 = first->wait(60), code1 = second->wait(60);
    expect_nothing_left("DSX_TEST_OUT=" + dir.path());
    return {code0, code1};
  }
  std::vector<std::string> static_node(int node_rank,
                                       const std::vector<std::string>& more = {}) const {
    std::vector<std::string> flags = {
        "--nnodes=2",    "--nproc-per-node=2", "--node_rank",   std::to_string(node_rank),
        "--master_addr", "127.0.0.1",          "--master_port", std::to_string(port)};
    flags.insert(flags.end(), more.begin(), more.end());
    return flags;
  }
};

}  // namespace

TEST_F(Torchrun, OneNodeGetsTorchrunsEnvironmentAndNoRankArgument) {
  auto vars = env("ok");
  vars.insert(vars.end(), {"PET_MAX_RESTARTS=2", "CUDA_VISIBLE_DEVICES=5,6"});
  auto run = start({"--standalone", "--nproc-per-node", "3", "--role", "trainer"}, vars, "run");
  ASSERT_EQ(run->wait(30), 0) << out("run");
  const std::string run_id = rank_env(0)["TORCHELASTIC_RUN_ID"];
  EXPECT_EQ(run_id.size(), 36u) << "a random UUID, as --standalone makes: " << run_id;
  for (int r = 0; r < 3; ++r) {
    const auto e = rank_env(r);
    expect_vars(e,
                {{"RANK", std::to_string(r)},
                 {"LOCAL_RANK", std::to_string(r)},
                 {"WORLD_SIZE", "3"},
                 {"LOCAL_WORLD_SIZE", "3"},
                 {"GROUP_RANK", "0"},
                 {"GROUP_WORLD_SIZE", "1"},
                 {"ROLE_RANK", std::to_string(r)},
                 {"ROLE_WORLD_SIZE", "3"},
                 {"ROLE_NAME", "trainer"},
                 {"MASTER_ADDR", "127.0.0.1"},
                 {"TORCHELASTIC_RESTART_COUNT", "0"},
                 {"TORCHELASTIC_MAX_RESTARTS", "2"},
                 {"TORCHELASTIC_RUN_ID", run_id},
                 {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
                 {"OMP_NUM_THREADS", "1"},
                 {"CUDA_VISIBLE_DEVICES", "5,6"}},
                "rank " + std::to_string(r));
    EXPECT_NE(e.at("MASTER_PORT"), "29500") << "--standalone takes a free port";
    EXPECT_EQ(read_text(dir / ("rank" + std::to_string(r) + ".args")), "a\nb c\n")
        << "torchrun adds no --local_rank";
  }
}

TEST_F(Torchrun, TwoNodesByHandFormOneJobAndAFailureRestartsBoth) {
  // Rank 3 (node 1) fails on the first start only.
  const auto [code0, code1] =
      two_nodes(static_node(0, {"--max_restarts", "2"}), static_node(1, {"--max-restarts=2"}),
                env("fail_restarts", 3, 9, 1));
  EXPECT_EQ(code0, 0) << out("node0");
  EXPECT_EQ(code1, 0) << out("node1");
  EXPECT_CONTAINS(out("node0"), "node 1: rank 3 (pid ");
  EXPECT_CONTAINS(out("node0"),
                  "exited with code 9; restarting this node's ranks (restart 1 of 2)");
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(exists(dir / ("rank" + std::to_string(r) + ".started1"))) << r;
    expect_vars(rank_env(r),
                {{"RANK", std::to_string(r)},
                 {"LOCAL_RANK", std::to_string(r % 2)},
                 {"WORLD_SIZE", "4"},
                 {"GROUP_RANK", std::to_string(r / 2)},
                 {"GROUP_WORLD_SIZE", "2"},
                 {"TORCHELASTIC_RESTART_COUNT", "1"},
                 {"TORCHELASTIC_RUN_ID", "none"},
                 {"MASTER_ADDR", "127.0.0.1"},
                 {"MASTER_PORT", rank_env(0)["MASTER_PORT"]}},
                "rank " + std::to_string(r));
  }
}

TEST_F(Torchrun, C10dNodesStopWithTheFailingCodeWhenRestartsRunOut) {
  const std::vector<std::string> c10d = {
      "--nnodes",       "2",     "--nproc_per_node", "2",
      "--rdzv_backend", "c10d",  "--rdzv_endpoint",  "127.0.0.1:" + std::to_string(port),
      "--rdzv_id",      "job42", "--max_restarts",   "1"};
  const auto [code0, code1] = two_nodes(c10d, c10d, env("fail_restarts", 3, 9, 99));
  EXPECT_EQ(code0, 9) << out("node0");
  EXPECT_EQ(code1, 9) << out("node1");
  EXPECT_CONTAINS(out("node0") + out("node1"), "exited with code 9; the job stops");
  EXPECT_EQ(rank_env(0)["TORCHELASTIC_RUN_ID"], "job42");
  EXPECT_EQ(rank_env(0)["TORCHELASTIC_RESTART_COUNT"], "1");
}

TEST_F(Torchrun, SrunStartsOneAgentPerNodeFromSlurmsVariables) {
  std::vector<std::string> vars = env("ok");
  vars.insert(vars.end(), {"SLURM_PROCID=0", "SLURM_NNODES=2", "SLURM_JOB_ID=777",
                           "SLURM_JOB_NODELIST=localhost"});
  std::vector<std::string> node0 = vars, node1 = vars;
  node0.push_back("SLURM_NODEID=0");
  node1.push_back("SLURM_NODEID=1");
  const std::vector<std::string> flags = {"--nproc_per_node", "2", "--master_port",
                                          std::to_string(port)};
  auto second = start(flags, node1, "node1");
  auto first = start(flags, node0, "node0");
  EXPECT_EQ(first->wait(60), 0) << out("node0");
  EXPECT_EQ(second->wait(60), 0) << out("node1");
  for (int r = 0; r < 4; ++r)
    expect_vars(rank_env(r),
                {{"RANK", std::to_string(r)},
                 {"GROUP_RANK", std::to_string(r / 2)},
                 {"WORLD_SIZE", "4"},
                 {"TORCHELASTIC_RUN_ID", "777"}},
                "rank " + std::to_string(r));
}

TEST_F(Torchrun, ALostNodeStopsTheOtherAtTheJoinTimeout) {
  auto vars = env("sleep");
  auto node1 = start(static_node(1, {"--max_restarts", "3"}), vars, "node1");
  auto node0 = start(static_node(0, {"--max_restarts", "3", "--rdzv_conf", "join_timeout=3"}), vars,
                     "node0");
  ASSERT_TRUE(wait_for([&] { return exists(dir / "rank3.pid") && exists(dir / "rank0.pid"); }, 30))
      << out("node0");
  node1->signal(SIGKILL);  // the agent of node 1 dies; its ranks get SIGTERM from the kernel
  EXPECT_EQ(node0->wait(30), 1) << out("node0");
  EXPECT_CONTAINS(out("node0"),
                  "the agent of node 127.0.0.1 is gone (node lost?); restarting this node's ranks");
  EXPECT_CONTAINS(out("node0"), "the rendezvous timed out: 1 of 2 nodes joined within 3 s");
  node1->wait(5);
  expect_nothing_left("DSX_TEST_OUT=" + dir.path());
}

TEST_F(Torchrun, RedirectsAndTeeWriteTorchrunsLogFilesAndTheFilterPicksTheConsole) {
  // Local rank 0: both streams to files only; 1: stderr to a file and the console; 2: not shown.
  auto run = start({"--standalone", "--nproc_per_node", "3", "--log_dir", dir / "logs", "--redirects", "0:3",
                    "--tee", "1:2", "--local_ranks_filter", "0,1"},
                   env("ok"), "run");
  ASSERT_EQ(run->wait(30), 0) << out("run");
  const std::string error_file = rank_env(0)["TORCHELASTIC_ERROR_FILE"];
  ASSERT_NE(error_file.find("/attempt_0/0/error.json"), std::string::npos) << error_file;
  const std::string attempt = error_file.substr(0, error_file.rfind("/0/"));
  EXPECT_EQ(read_text(attempt + "/0/stdout.log"), "rank 0 says hello\n");
  EXPECT_EQ(read_text(attempt + "/0/stderr.log"), "rank 0 to stderr\n");
  EXPECT_EQ(read_text(attempt + "/1/stderr.log"), "rank 1 to stderr\n");
  EXPECT_FALSE(exists(attempt + "/1/stdout.log"));
  EXPECT_EQ(out("run").find("rank 0 says"), std::string::npos) << "redirected: " << out("run");
  EXPECT_CONTAINS(out("run"), "[rank1]: rank 1 says hello\n");
  EXPECT_CONTAINS(out("run"), "[rank1]: rank 1 to stderr\n");
  EXPECT_EQ(out("run").find("rank 2 says"), std::string::npos) << "filtered out: " << out("run");
}

TEST_F(Torchrun, BadCommandLinesAreRefusedSayingWhatToDo) {
  const auto refused = [&](const std::string& flags, const std::string& message) {
    const auto r =
        run_command(std::string(DSX_EXE) + " torchrun " + flags + " " + probe_script() + " 2>&1");
    EXPECT_NE(r.exit_code, 0) << flags;
    EXPECT_CONTAINS(r.output, message);
  };
  refused("--nnodes 1:2", "a node range needs the c10d rendezvous");
  refused("--nnodes 2:1", "min_nodes must be > 0 and <= max_nodes");
  refused("--nproc_per_node lots", "give a count, gpu, cpu or auto");
  refused("-m --no_python", "don't use both the '--no-python' flag and the '--module' flag");
  refused("--rdzv_backend etcd", "use c10d or static");
  refused("--rdzv_backend c10d", "needs --rdzv_endpoint HOST[:PORT]");
  refused("--nnodes 2 --node_rank 2", "--node_rank 2: give 0..1");
  refused("--max_restarts -1", "--max_restarts must be >= 0");
  refused("--standalone --rdzv_conf join_timeout", "--rdzv_conf 'join_timeout': give KEY=VALUE");
  refused("--standalone --tee 3", "--redirects/--tee write files under --log_dir: give --log_dir DIR");
  // `dsx launch` (the deepspeed launcher) points torchrun's flags here.
  const auto r =
      run_command(std::string(DSX_EXE) + " launch --nproc_per_node 2 " + probe_script() + " 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_CONTAINS(
      r.output,
      "'--nproc_per_node' is torchrun's flag; run `dsx torchrun` with the same command line");
}

// dsx train under two agents: rank 3 (node 1) is killed after the first checkpoint; both nodes
// restart, resume from --save without --load, and end bit-identical to an uninterrupted run.
TEST_F(Torchrun, TwoNodesOfDsxTrainResumeAfterAKillBitIdentical) {
  std::ofstream(dir / "ds_config.json")
      << R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "steps_per_print": 1000,
            "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}, "zero_optimization": {"stage": 1}})";
  const std::string marker = "DSX_TEST_OUT=" + dir.path();
  const auto train = [&](const std::string& save) {
    const int rdzv = free_port();
    std::vector<std::unique_ptr<Background>> nodes;
    for (int node : {1, 0}) {
      std::vector<std::string> argv = {DSX_EXE,
                                       "torchrun",
                                       "--nnodes",
                                       "2",
                                       "--nproc_per_node",
                                       "2",
                                       "--node_rank",
                                       std::to_string(node),
                                       "--master_port",
                                       std::to_string(rdzv),
                                       "--max_restarts",
                                       "1",
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
                                       "120",
                                       "--save_interval",
                                       "10",
                                       "--save",
                                       dir / save};
      nodes.push_back(std::make_unique<Background>(
          argv,
          std::vector<std::string>{"FI_TCP_IFACE=lo", "FI_SOCKETS_IFACE=lo", "OMP_NUM_THREADS=1",
                                   marker},
          dir / (save + std::to_string(node) + ".out")));
    }
    return nodes;
  };
  for (auto& node : train("reference"))
    ASSERT_EQ(node->wait(120), 0) << out("reference0") << out("reference1");

  auto nodes = train("ck");
  ASSERT_TRUE(wait_for([&] { return !read_text(dir / "ck/latest").empty(); }, 60)) << out("ck0");
  pid_t pid = 0;
  ASSERT_TRUE(wait_for(
      [&] {
        for (pid_t p : processes_with_env(marker)) {
          const auto e = read_env_of(p);
          if (e.count("RANK") && e.at("RANK") == "3") pid = p;
        }
        return pid > 0;
      },
      20));
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  for (auto& node : nodes) ASSERT_EQ(node->wait(120), 0) << out("ck0") << out("ck1");
  expect_nothing_left(marker);
  // Node 1 sees its rank killed; which failure the rendezvous hears first (that one, or a rank of
  // node 0 whose collective lost rank 3) is a race: either restarts both nodes.
  EXPECT_CONTAINS(out("ck1"),
                  "rank 3 (pid " + std::to_string(pid) + ") was killed by signal 9 (Killed)");
  EXPECT_CONTAINS(out("ck0"), "restarting this node's ranks (restart 1 of 1)");
  EXPECT_CONTAINS(out("ck0"), "dsx train: resumed from " + (dir / "ck") + "/global_step");
  for (int r = 0; r < 4; ++r) {
    const std::string name = "/global_step120/zero_pp_rank_" + std::to_string(r) +
                             "_mp_rank_00_optim_states.safetensors";
    EXPECT_EQ(read_text(dir / ("ck" + name)), read_text(dir / ("reference" + name)))
        << "rank " << r;
  }
  EXPECT_EQ(read_text(dir / "ck/global_step120/mp_rank_00_model_states.safetensors"),
            read_text(dir / "reference/global_step120/mp_rank_00_model_states.safetensors"));
}
