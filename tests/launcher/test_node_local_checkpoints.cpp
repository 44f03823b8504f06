// Checkpoints with no shared directory: two "nodes" (127.0.0.1 and 127.0.0.2 behind a real sshd),
// each running its ranks in a directory of its own, so that neither sees the other's files. A job
// saves, is killed at each phase of the commit on one node, resumes from the newest checkpoint
// every node holds, and ends bit-identical to a run that was never interrupted; one node's copy
// exports the model.
#include "tests/launcher/sshd_fixture.h"

using namespace dsx::test;

namespace {

class NodeLocalCheckpoints : public SshdFixture {
 protected:
  void SetUp() override {
    SshdFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    for (const char* node : {"node0", "node1"}) std::filesystem::create_directories(dir / node);
    config(true);
  }

  void config(bool node_local) {
    std::ofstream(dir / "ds_config.json")
        << R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1, "steps_per_print": 100,
              "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
              "zero_optimization": {"stage": 2},
              "checkpoint": {"use_node_local_storage": )"
        << (node_local ? "true" : "false") << "}}";
  }

  // dsx train on 2 nodes x 2 ranks, each node in its own directory (dir/node<NODE_RANK>), with
  // `--save ck` relative to it (or `save`). `fault`: DSX_CHECKPOINT_FAULT for every rank.
  int train(const std::string& args, const std::string& fault = "", const std::string& save = "ck") {
    const std::string command = "cd " + dir.path() + "/node$NODE_RANK && export OMP_NUM_THREADS=1 DSX_CHECKPOINT_FAULT=" +
                                fault + " && exec " + DSX_EXE + " train --deepspeed_config " + (dir / "ds_config.json") +
                                " --model byte-tiny --eval_interval 0 --samples 0 --progress plain --save " + save + " " + args;
    std::vector<std::string> argv = {DSX_EXE, "launch", "-H", write_hostfile("127.0.0.1 slots=2\n127.0.0.2 slots=2\n"),
                                     "--launcher", "ssh", "--launcher_args", "-F " + client_config, "--master_port",
                                     std::to_string(free_port()), "--kill_grace_s", "3", "--no_local_rank", "bash", "-c", command};
    Background run(argv, {"FI_TCP_IFACE=lo", "FI_SOCKETS_IFACE=lo", "DSX_TEST_OUT=" + dir.path()}, dir / "launch.out",
                   dir.path());
    const int code = run.wait(240);
    expect_nothing_left("DSX_TEST_OUT=" + dir.path());
    return code;
  }
  std::string output() const { return read_text(dir / "launch.out"); }
  std::string latest(int node) const { return read_text(dir / ("node" + std::to_string(node)) + "/ck/latest"); }
  std::string node_dir(int node) const { return dir / ("node" + std::to_string(node)); }
};

}  // namespace

TEST_F(NodeLocalCheckpoints, KilledAtEachPhaseOfTheCommitResumesFromWhatEveryNodeHolds) {
  // The reference: 8 steps uninterrupted, in a directory pair of its own.
  ASSERT_EQ(train("--steps 8 --save_interval 4"), 0) << output();
  for (int node : {0, 1}) {
    EXPECT_EQ(latest(node), "global_step8");
    std::filesystem::rename(node_dir(node) + "/ck", node_dir(node) + "/reference");
  }
  // Each node holds its own ranks' files and its own copy of the model states.
  ASSERT_EQ(train("--steps 4 --save_interval 4"), 0) << output();
  const std::string manifest1 = read_text(node_dir(1) + "/ck/global_step4/manifest.json");
  EXPECT_NE(manifest1.find("\"node\": 1"), std::string::npos) << manifest1;
  EXPECT_TRUE(exists(node_dir(1) + "/ck/global_step4/zero_pp_rank_2_mp_rank_00_optim_states.safetensors"));
  EXPECT_FALSE(exists(node_dir(1) + "/ck/global_step4/zero_pp_rank_0_mp_rank_00_optim_states.safetensors"));
  EXPECT_TRUE(exists(node_dir(1) + "/ck/global_step4/mp_rank_00_model_states.safetensors"));
  auto verify = run_command(std::string(DSX_EXE) + " checkpoint verify " + node_dir(1) + "/ck");
  EXPECT_EQ(verify.exit_code, 0) << verify.output;
  EXPECT_NE(verify.output.find("node 1 of 2: ranks 2-3"), std::string::npos) << verify.output;

  // Killed before the commit (node 1 dies writing, or after checking its files): every node keeps
  // global_step4 as latest.
  for (const char* fault : {"write@1", "verify@1", "verify@0"}) {
    EXPECT_NE(train("--steps 8 --save_interval 2 --load ck", fault), 0) << fault << ": " << output();
    EXPECT_EQ(latest(0), "global_step4") << fault;
    EXPECT_EQ(latest(1), "global_step4") << fault;
  }
  // Killed while installing: node 0 moved to global_step6, node 1 did not. The resume takes
  // global_step4, which both hold, and says why.
  EXPECT_NE(train("--steps 8 --save_interval 2 --load ck", "install@1"), 0) << output();
  EXPECT_EQ(latest(0), "global_step6");
  EXPECT_EQ(latest(1), "global_step4");
  ASSERT_EQ(train("--steps 8 --save_interval 4 --load ck"), 0) << output();
  EXPECT_NE(output().find("resuming from global_step4, the newest every node holds"), std::string::npos) << output();
  EXPECT_NE(output().find("resumed from ck/global_step4 at step 4"), std::string::npos) << output();

  // The interrupted run ends where the uninterrupted one did, bit for bit, and either node's copy
  // exports the model.
  for (int node : {0, 1}) {
    EXPECT_EQ(latest(node), "global_step8");
    const std::string a = node_dir(node) + "/a.safetensors", b = node_dir(node) + "/b.safetensors";
    auto ea = run_command(std::string(DSX_EXE) + " export " + node_dir(node) + "/ck --out " + a);
    auto eb = run_command(std::string(DSX_EXE) + " export " + node_dir(node) + "/reference --out " + b);
    ASSERT_EQ(ea.exit_code, 0) << ea.output;
    ASSERT_EQ(eb.exit_code, 0) << eb.output;
    EXPECT_EQ(read_text(a), read_text(b)) << "node " << node << ": the resumed run's weights differ";
    EXPECT_EQ(read_text(node_dir(node) + "/ck/global_step8/zero_pp_rank_" + std::to_string(2 * node) +
                        "_mp_rank_00_optim_states.safetensors"),
              read_text(node_dir(node) + "/reference/global_step8/zero_pp_rank_" + std::to_string(2 * node) +
                        "_mp_rank_00_optim_states.safetensors"))
        << "node " << node << ": the resumed run's optimizer state differs";
  }
}

// Without checkpoint.use_node_local_storage, a save directory the nodes do not share is found out
// before the files are written, and the save goes per node with a note instead of failing.
TEST_F(NodeLocalCheckpoints, UnsharedSaveDirectoryIsFoundAndSavedPerNode) {
  config(false);
  ASSERT_EQ(train("--steps 2 --save_interval 2"), 0) << output();
  EXPECT_NE(output().find("is not one directory the 2 nodes share: each node keeps its own ranks' files"),
            std::string::npos)
      << output();
  EXPECT_EQ(latest(0), "global_step2");
  EXPECT_EQ(latest(1), "global_step2");
  ASSERT_EQ(train("--steps 3 --load ck"), 0) << output();
  EXPECT_NE(output().find("resumed from ck/global_step2 at step 2"), std::string::npos) << output();
  // A node whose copy is gone: no rank resumes, and the error names what each node holds.
  std::filesystem::remove_all(node_dir(1) + "/ck");
  EXPECT_NE(train("--steps 4 --load ck"), 0);
  EXPECT_NE(output().find("node 1 holds none"), std::string::npos) << output();
}

// DeepSpeed configs carry checkpoint.use_node_local_storage onto shared file systems too, and
// `dsx cloud --storage` points --save at shared storage. With the flag on a directory both nodes
// see, the probe finds it shared and one copy is saved, as without the flag.
TEST_F(NodeLocalCheckpoints, NodeLocalStorageOnASharedDirectorySavesOneCopy) {
  const std::string shared = dir / "shared_ck";
  ASSERT_EQ(train("--steps 2 --save_interval 2", "", shared), 0) << output();
  EXPECT_NE(output().find("checkpoint.use_node_local_storage: " + shared + " is one directory the 2 nodes share"),
            std::string::npos) << output();
  EXPECT_EQ(read_text(shared + "/latest"), "global_step2");
  const std::string manifest = read_text(shared + "/global_step2/manifest.json");
  EXPECT_EQ(manifest.find("\"node\""), std::string::npos) << "a node's part, not the whole save: " << manifest;
  for (int r = 0; r < 4; ++r)
    EXPECT_TRUE(exists(shared + "/global_step2/zero_pp_rank_" + std::to_string(r) + "_mp_rank_00_optim_states.safetensors"));
  auto verify = run_command(std::string(DSX_EXE) + " checkpoint verify " + shared);
  EXPECT_EQ(verify.exit_code, 0) << verify.output;
  EXPECT_NE(verify.output.find("global_step2: 4 ranks, 5 files"), std::string::npos) << verify.output;
  ASSERT_EQ(train("--steps 3 --load " + shared, "", shared), 0) << output();
  EXPECT_NE(output().find("resumed from " + shared + "/global_step2 at step 2"), std::string::npos) << output();
  EXPECT_EQ(read_text(shared + "/latest"), "global_step3");
}
