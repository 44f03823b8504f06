// `dsx torchrun --nnodes 1:2` (elastic membership) with real processes on loopback: two agents
// on this machine form one job over c10d; a node whose rank fails twice is left out and the job
// re-forms on the other; a late node joins at the next restart; a node lost for good (its agent
// killed) leaves a `dsx train` that continues on the remaining node at the same global batch.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "checkpoint/tensor_file.h"
#include "tests/expect_contains.h"
#include "tests/launcher/launch_test_util.h"

using namespace dsx::test;

namespace {

// Whether something listens on 127.0.0.1:port (a connect, never a bind that could steal it).
bool listening(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// Open TCP connections with an end at 127.0.0.1:port (each agent's counts twice: both ends).
int connections_at(int port) {
  std::ifstream tcp("/proc/net/tcp");
  std::string line;
  std::getline(tcp, line);  // the header
  char hex[8];
  std::snprintf(hex, sizeof hex, ":%04X", port);
  int count = 0;
  while (std::getline(tcp, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    fields >> slot >> local >> remote >> state;
    if (state == "01" && (local.ends_with(hex) || remote.ends_with(hex))) ++count;
  }
  return count;
}

struct ElasticTorchrun : testing::Test {
  ScratchDir dir;
  int rdzv = free_port();

  std::vector<std::string> agent(const std::vector<std::string>& program,
                                 const std::string& rdzv_conf = "join_timeout=30") const {
    std::vector<std::string> argv = {DSX_EXE,
                                     "torchrun",
                                     "--nnodes",
                                     "1:2",
                                     "--nproc_per_node",
                                     "1",
                                     "--rdzv_backend",
                                     "c10d",
                                     "--rdzv_endpoint",
                                     "127.0.0.1:" + std::to_string(rdzv),
                                     "--rdzv_conf",
                                     rdzv_conf,
                                     "--max_restarts",
                                     "3"};
    argv.insert(argv.end(), program.begin(), program.end());
    return argv;
  }
  // Node a first (it serves the rendezvous and becomes group rank 0), then node b.
  std::pair<std::unique_ptr<Background>, std::unique_ptr<Background>> two_agents(
      const std::vector<std::string>& program, const std::vector<std::string>& vars) {
    auto a = std::make_unique<Background>(agent(program), vars, dir / "a.out");
    // Connected once its `dsx report --check` passed, and joins at once: before b, whose check
    // takes a second.
    EXPECT_TRUE(wait_for([&] { return connections_at(rdzv) >= 2; }, 20)) << out("a");
    auto b = std::make_unique<Background>(agent(program), vars, dir / "b.out");
    return {std::move(a), std::move(b)};
  }
  std::string out(const std::string& name) const { return read_text(dir / (name + ".out")); }
};

// The fp32 master weights of a one-rank save.
std::vector<float> master_weights(const std::string& step_dir) {
  namespace ck = dsx::checkpoint;
  const auto f =
      ck::TensorFile::load(step_dir + "/zero_pp_rank_0_mp_rank_00_optim_states.safetensors");
  std::vector<float> w(f.view("fp32_flat_partition").numel());
  f.read("fp32_flat_partition", ck::TensorDType::F32, w.data(), w.size());
  return w;
}

double max_difference(const std::vector<float>& x, const std::vector<float>& y) {
  double most = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i)
    most = std::max(most, std::fabs(static_cast<double>(x[i]) - y[i]));
  return most;
}

}  // namespace

TEST_F(ElasticTorchrun, ANodeThatFailsTwiceIsLeftOutAndTheJobGoesOnWithoutIt) {
  // Rank 1 (node b) exits 7 on restarts 0 and 1; from restart 2 every rank succeeds at once.
  const std::vector<std::string> vars = {"DSX_TEST_OUT=" + dir.path(),
                                         "DSX_TEST_MODE=fail_restarts", "DSX_TEST_RANK=1",
                                         "DSX_TEST_CODE=7", "DSX_TEST_UNTIL=2"};
  auto [a, b] = two_agents({"--no_python", probe_script()}, vars);
  EXPECT_EQ(b->wait(60), 1) << out("b");
  EXPECT_EQ(a->wait(60), 0) << out("a");
  expect_nothing_left("DSX_TEST_OUT=" + dir.path());
  EXPECT_CONTAINS(out("b"),
                  "exited with code 7; node 127.0.0.1 failed twice and is left out "
                  "(--nnodes 1..2); the others go on without it");
  EXPECT_CONTAINS(out("a"),
                  "node 127.0.0.1 failed twice and is left out, the job re-forms with "
                  "the nodes that remain; restarting this node's ranks (restart 2 of 3)");
  EXPECT_CONTAINS(out("a"), "the job re-forms with 1 node(s) instead of 2 (1 ranks, attempt 2)");
  EXPECT_TRUE(exists(dir / "rank1.started1"));
  EXPECT_TRUE(exists(dir / "rank0.started2"));
  EXPECT_FALSE(exists(dir / "rank1.started2")) << "the left-out node ran again";
  const auto env = read_env(dir / "rank0.env");
  EXPECT_EQ(env.at("WORLD_SIZE"), "1");
  EXPECT_EQ(env.at("DSX_ELASTIC_BATCH"), "1");
}

TEST_F(ElasticTorchrun, AFirstWorldOfMinNodesAtTheLastCallAndALateNodeJoiningAtTheNextRestart) {
  // Node a alone (MIN = 1) forms the first world at torchrun's last call, 2 s after the MIN-th
  // join, not at the join timeout (30 s); its rank sleeps; node b comes while it runs and waits;
  // the rank fails, and the restart forms a world of both.
  const std::vector<std::string> vars = {"DSX_TEST_OUT=" + dir.path(), "DSX_TEST_MODE=sleep_first"};
  const auto start = Clock::now();
  auto a = std::make_unique<Background>(
      agent({"--no_python", probe_script()}, "join_timeout=30,last_call_timeout=2"), vars,
      dir / "a.out");
  ASSERT_TRUE(wait_for([&] { return exists(dir / "rank0.pid"); }, 20)) << out("a");
  const double formed_s = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_GE(formed_s, 2.0) << "the world formed before the last call";
  EXPECT_LT(formed_s, 15.0) << "the world waited for the join timeout (30 s), not the last call";
  EXPECT_EQ(read_env(dir / "rank0.env").at("WORLD_SIZE"), "1");
  auto b =
      std::make_unique<Background>(agent({"--no_python", probe_script()}), vars, dir / "b.out");
  // b is connected (a's agent and b's: 4 ends) and its JOIN, sent right after, is in.
  ASSERT_TRUE(wait_for([&] { return connections_at(rdzv) >= 4; }, 20)) << out("b");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_FALSE(exists(dir / "rank1.pid")) << "a node joined a running world";
  ASSERT_EQ(::kill(read_pid(dir / "rank0.pid"), SIGTERM), 0);  // it exits 143: a failure
  EXPECT_EQ(a->wait(30), 0) << out("a");
  EXPECT_EQ(b->wait(30), 0) << out("b");
  expect_nothing_left("DSX_TEST_OUT=" + dir.path());
  EXPECT_CONTAINS(out("a"), "the job re-forms with 2 node(s) instead of 1 (2 ranks, attempt 1)");
  const auto env = read_env(dir / "rank1.env");
  EXPECT_EQ(env.at("WORLD_SIZE"), "2");
  EXPECT_EQ(env.at("TORCHELASTIC_RESTART_COUNT"), "1");
}

// 2 nodes x 1 rank train with train_batch_size 8 = 2 x 2 x 2; node b's agent is killed after the
// first checkpoint, for good. Node a re-forms alone, resumes the world-2 checkpoint at world 1
// with the accumulation doubled (2 x 4 x 1 = 8) and finishes, saying so.
TEST_F(ElasticTorchrun, TwoNodesOfDsxTrainLoseOneForGoodAndGoOnAtTheSameGlobalBatch) {
  std::ofstream(dir / "ds_config.json")
      << R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
            "gradient_accumulation_steps": 2, "steps_per_print": 1000,
            "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}, "zero_optimization": {"stage": 1}})";
  const std::string marker = "DSX_TEST_OUT=" + dir.path();
  const auto train = [&](const std::string& save) -> std::vector<std::string> {
    return {DSX_EXE,     "train",     "--deepspeed_config", dir / "ds_config.json",
            "--model",   "byte-tiny", "--eval_interval",    "0",
            "--samples", "0",         "--progress",         "plain",
            "--steps",   "40",        "--save_interval",    "10",
            "--save",    dir / save};
  };
  const std::vector<std::string> vars = {"FI_TCP_IFACE=lo", "FI_SOCKETS_IFACE=lo",
                                         "OMP_NUM_THREADS=1", marker};
  // The reference: one rank from the start, the same 8 examples a step (2 x 4 x 1).
  std::vector<std::string> one_rank = vars;
  one_rank.push_back("DSX_ELASTIC_BATCH=1");
  ASSERT_EQ(Background(train("reference"), one_rank, dir / "reference.out").wait(60), 0)
      << out("reference");
  auto [a, b] = two_agents(train("ck"), vars);
  ASSERT_TRUE(wait_for([&] { return !read_text(dir / "ck/latest").empty(); }, 90)) << out("a");
  b->signal(SIGKILL);  // node b is gone: its agent dies, its rank gets SIGTERM from the kernel
  b->wait(10);
  ASSERT_EQ(a->wait(120), 0) << out("a");
  expect_nothing_left(marker);
  EXPECT_CONTAINS(out("a"), "the job re-forms with 1 node(s) instead of 2 (1 ranks, attempt 1)");
  EXPECT_CONTAINS(out("a"),
                  "elastic: world 2 -> 1 ranks: micro-batch 2 -> 2, gradient "
                  "accumulation 2 -> 4 (train_batch_size 8 kept)");
  EXPECT_CONTAINS(out("a"), "dsx train: resumed from " + (dir / "ck") + "/global_step");
  EXPECT_TRUE(exists(dir / "ck/global_step40/zero_pp_rank_0_mp_rank_00_optim_states.safetensors"));
  EXPECT_FALSE(exists(dir / "ck/global_step40/zero_pp_rank_1_mp_rank_00_optim_states.safetensors"))
      << "the last save was made by two ranks";
  // Each step read the same 8 examples as the one-rank run (none repeated or skipped across the
  // change): the weights agree up to the order of float sums (about 1e-5 here), far closer than
  // 10 steps apart (1e-2); a position not re-cut for the new width gives about 1e-2.
  const auto reference = master_weights(dir / "reference/global_step40");
  const double off = max_difference(master_weights(dir / "ck/global_step40"), reference);
  const double ten_steps =
      max_difference(master_weights(dir / "reference/global_step30"), reference);
  EXPECT_LT(off, 1e-3) << "ten steps move the weights by " << ten_steps;
  EXPECT_LT(off * 10, ten_steps);
  std::cout << "elastic run vs one rank: max |difference| " << off << " (ten steps: " << ten_steps
            << ")" << std::endl;
}

// A node whose `dsx report --check` fails is left out before it joins: here node a, which serves
// the rendezvous, has FI_TCP_IFACE naming no interface (a real error of the check: its ranks
// could open no socket). It says so in one line and serves on; node b forms the world alone at
// the last call and finishes.
TEST_F(ElasticTorchrun, ANodeThatFailsItsReportCheckIsLeftOutAndTheOthersGoOn) {
  const std::vector<std::string> program = {"--no_python", probe_script()};
  const std::string conf = "join_timeout=30,last_call_timeout=1";
  const std::string marker = "DSX_TEST_OUT=" + dir.path();
  auto a = std::make_unique<Background>(agent(program, conf),
                                        std::vector<std::string>{marker, "FI_TCP_IFACE=nosuch0"},
                                        dir / "a.out");
  ASSERT_TRUE(wait_for([&] { return listening(rdzv); }, 10)) << out("a");
  auto b = std::make_unique<Background>(agent(program, conf), std::vector<std::string>{marker},
                                        dir / "b.out");
  EXPECT_EQ(b->wait(60), 0) << out("b");
  EXPECT_EQ(a->wait(30), 1) << out("a");
  expect_nothing_left(marker);
  EXPECT_CONTAINS(out("a"),
                  "dsx torchrun: this node fails `dsx report --check` (dsx report: socket-ifname: "
                  "FI_TCP_IFACE=nosuch0 matches no network interface here");
  EXPECT_CONTAINS(out("a"), "it is left out of the job (--nnodes 1..2); the others go on without it");
  EXPECT_TRUE(exists(dir / "rank0.env")) << out("b");
  EXPECT_FALSE(exists(dir / "rank1.env")) << "the left-out node ran a rank";
  const auto env = read_env(dir / "rank0.env");
  EXPECT_EQ(env.at("WORLD_SIZE"), "1");
  EXPECT_NE(env.count("FI_TCP_IFACE") ? env.at("FI_TCP_IFACE") : "", "nosuch0")
      << "the rank ran on the left-out node";
}
