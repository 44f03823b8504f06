// The environment of every rank for several layouts (ref/launcher.md 4.2, 4.3), the rank command
// line, and core binding.
#include <gtest/gtest.h>

#include <map>

#include "dsx/error.h"
#include "launcher/core_binding.h"
#include "launcher/rank_command.h"
#include "launcher/rank_env.h"
#include "launcher/rank_shim.h"
#include "tests/launcher/launch_test_util.h"

using namespace dsx::launcher;
using dsx::test::expect_vars;

namespace {

std::map<std::string, std::string> env_of(const World& w, int node, int index, LocalRankRule rule = LocalRankRule::Modulo) {
  auto p = place_ranks(w, node, rule).at(index);
  auto vars = rank_environment(w, node, p, "10.0.0.1", 29500);
  return {vars.begin(), vars.end()};
}

}  // namespace

TEST(RankEnv, DeepSpeedVectorTwoNodes) {
  World w = {{"worker-0", {0, 1}}, {"worker-1", {2}}};
  expect_vars(env_of(w, 0, 1), {{"RANK", "1"}, {"LOCAL_RANK", "1"}, {"CUDA_VISIBLE_DEVICES", "0,1"},
                                {"LOCAL_SIZE", "2"}, {"WORLD_SIZE", "3"}, {"CROSS_SIZE", "2"}});
  expect_vars(env_of(w, 1, 0), {{"RANK", "2"}, {"LOCAL_RANK", "0"}, {"CUDA_VISIBLE_DEVICES", "2"},
                                {"LOCAL_SIZE", "1"}, {"CROSS_RANK", "1"}, {"WORLD_SIZE", "3"}});
}

TEST(RankEnv, TorchrunContractOnEveryRank) {
  World w = {{"a", {0, 1, 2, 3}}, {"b", {0, 1, 2, 3}}};
  for (int node = 0; node < 2; ++node) {
    for (int i = 0; i < 4; ++i) {
      const std::string rank = std::to_string(node * 4 + i);
      expect_vars(env_of(w, node, i),
                  {{"RANK", rank},
                   {"ROLE_RANK", rank},
                   {"LOCAL_RANK", std::to_string(i)},
                   {"LOCAL_WORLD_SIZE", "4"},
                   {"GROUP_RANK", std::to_string(node)},
                   {"NODE_RANK", std::to_string(node)},
                   {"GROUP_WORLD_SIZE", "2"},
                   {"ROLE_WORLD_SIZE", "8"},
                   {"ROLE_NAME", "default"},
                   {"MASTER_ADDR", "10.0.0.1"},
                   {"MASTER_PORT", "29500"},
                   {"TORCHELASTIC_USE_AGENT_STORE", "False"},
                   {"TORCHELASTIC_RESTART_COUNT", "0"},
                   {"TORCHELASTIC_RUN_ID", "dsx-10.0.0.1-29500"}},
                  "rank " + rank);
    }
  }
}

TEST(RankEnv, UnevenNodesModuloPermutesLikeDeepSpeed) {
  World w = {{"a", {0, 1, 2}}, {"b", {1, 3}}};
  // DeepSpeed #3409: LOCAL_RANK = RANK mod local size, so on b rank 3 gets 1 and rank 4 gets 0.
  EXPECT_EQ(env_of(w, 1, 0)["RANK"], "3");
  EXPECT_EQ(env_of(w, 1, 0)["LOCAL_RANK"], "1");
  EXPECT_EQ(env_of(w, 1, 1)["LOCAL_RANK"], "0");
  EXPECT_EQ(env_of(w, 1, 0)["CUDA_VISIBLE_DEVICES"], "1,3");
  // torchrun: position on the node.
  EXPECT_EQ(env_of(w, 1, 0, LocalRankRule::Index)["LOCAL_RANK"], "0");
  EXPECT_EQ(env_of(w, 1, 1, LocalRankRule::Index)["LOCAL_RANK"], "1");
  EXPECT_THROW(parse_local_rank_rule("other"), dsx::Error);
}

TEST(RankEnv, NodeRankOutsideWorld) { EXPECT_THROW(place_ranks({{"a", {0}}}, 1, LocalRankRule::Modulo), dsx::Error); }

TEST(RankCommand, PythonScriptsModulesAndDirectPrograms) {
  ProgramSpec py{"train.py", {"--deepspeed", "--x=1"}, false, false, false};
  EXPECT_EQ(rank_argv(py, 3, "/usr/bin/python3"),
            (std::vector<std::string>{"/usr/bin/python3", "-u", "train.py", "--local_rank=3", "--deepspeed", "--x=1"}));
  ProgramSpec mod{"pkg.train", {}, true, false, true};
  EXPECT_EQ(rank_argv(mod, 0, "py"), (std::vector<std::string>{"py", "-u", "-m", "pkg.train"}));
  ProgramSpec direct{"./a.out", {"x"}, false, true, false};
  EXPECT_EQ(rank_argv(direct, 1, "py"), (std::vector<std::string>{"./a.out", "--local_rank=1", "x"}));
  // An ELF binary and a shell script run directly even without --no_python.
  ProgramSpec elf{"/bin/sh", {}, false, false, true};
  EXPECT_EQ(rank_argv(elf, 0, "py"), (std::vector<std::string>{"/bin/sh"}));
  EXPECT_TRUE(runs_without_python("sh"));
  EXPECT_FALSE(runs_without_python("no-such-program-dsx"));
}

TEST(CoreBinding, ListsAndSplits) {
  EXPECT_EQ(parse_core_list("1,3-5,7"), (std::vector<int>{1, 3, 4, 5, 7}));
  for (const char* bad : {"1, 3", "3,1", "1-3,2", "5-3", "a", "", "1,,2"}) EXPECT_THROW(parse_core_list(bad), dsx::Error) << bad;
  std::vector<int> cores = {0, 1, 2, 3, 4};
  EXPECT_EQ(cores_for_rank(cores, 2, 0), (std::vector<int>{0, 1}));
  EXPECT_EQ(cores_for_rank(cores, 2, 1), (std::vector<int>{2, 3}));
  EXPECT_THROW(cores_for_rank({0}, 2, 0), dsx::Error);
  EXPECT_FALSE(available_cores().empty());
}

TEST(RankShim, MapsOpenMpiSlurmAndPmi) {
  auto m = [](const std::vector<EnvVar>& env) {
    auto v = scheduler_rank_env(env);
    return std::map<std::string, std::string>(v.begin(), v.end());
  };
  expect_vars(m({{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                 {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}),
              {{"RANK", "5"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "8"}, {"CROSS_RANK", "1"}, {"CROSS_SIZE", "2"}},
              "Open MPI");
  expect_vars(m({{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "5"}, {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "2"},
                 {"SLURM_NNODES", "3"}, {"SLURM_TASKS_PER_NODE", "2(x2),1"}}),
              {{"RANK", "4"}, {"LOCAL_SIZE", "1"}, {"NODE_RANK", "2"}, {"GROUP_WORLD_SIZE", "3"}}, "Slurm");
  expect_vars(m({{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "2"}}),
              {{"LOCAL_RANK", "1"}, {"GROUP_RANK", "1"}}, "PMI");
  EXPECT_THROW(scheduler_rank_env({}), dsx::Error);
  EXPECT_THROW(scheduler_rank_env({{"PMI_RANK", "1"}, {"PMIX_RANK", "2"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "0"},
                                   {"MPI_LOCALNRANKS", "1"}}),
               dsx::Error);
}
