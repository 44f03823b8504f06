// `dsx checkpoint list|verify` as a user meets it: the real binary on a real save directory,
// an intact checkpoint, a damaged one (exit 1, the file named), and usage errors (exit 2).
#include <gtest/gtest.h>

#include <fstream>

#include "tests/checkpoint/checkpoint_test_util.h"
#include "tests/tools/run_command.h"

using dsx::test::run_dsx;
using dsx::test::TempDir;

TEST(CheckpointCli, ListsTagsAndVerifiesTheLatest) {
  TempDir tmp;
  dsx::test::save_test_checkpoint(tmp.path(), "global_step1", 2, 1, 1000);
  dsx::test::save_test_checkpoint(tmp.path(), "global_step2", 2, 2, 1000);
  std::filesystem::create_directory(tmp.file(".global_step3.saving"));
  std::filesystem::create_directories(tmp.file("logs/run1"));  // a monitor's output_path, say
  std::ofstream(tmp.file("logs/run1/events.csv")) << "step,loss\n";

  auto list = run_dsx("checkpoint list " + tmp.path());
  EXPECT_EQ(list.exit_code, 0) << list.output;
  EXPECT_NE(list.output.find("(latest: global_step2)"), std::string::npos) << list.output;
  EXPECT_NE(list.output.find("    global_step1  2 ranks, 0.0 MB"), std::string::npos)
      << list.output;
  EXPECT_NE(list.output.find("  * global_step2  2 ranks"), std::string::npos) << list.output;
  EXPECT_NE(list.output.find(".global_step3.saving  incomplete"), std::string::npos) << list.output;
  EXPECT_EQ(list.output.find("logs  not loadable"), std::string::npos) << list.output;
  EXPECT_NE(list.output.find("other folders (not checkpoints): logs"), std::string::npos) << list.output;

  auto verify = run_dsx("checkpoint verify " + tmp.path());
  EXPECT_EQ(verify.exit_code, 0) << verify.output;
  EXPECT_NE(verify.output.find("global_step2: 2 ranks, 3 files"), std::string::npos)
      << verify.output;
  EXPECT_NE(verify.output.find("every size and CRC32C matches"), std::string::npos)
      << verify.output;
}

TEST(CheckpointCli, DamagedFileFailsVerifyNamingIt) {
  TempDir tmp;
  dsx::test::save_test_checkpoint(tmp.path(), "global_step1", 2, 1, 1000);
  const std::string victim =
      tmp.file("global_step1/zero_pp_rank_1_mp_rank_00_optim_states.safetensors");
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-7, std::ios::end);
    f.put('\x55');
  }
  auto verify = run_dsx("checkpoint verify " + tmp.path() + " --tag global_step1");
  EXPECT_EQ(verify.exit_code, 1) << verify.output;
  EXPECT_NE(verify.output.find(victim + " is corrupt"), std::string::npos) << verify.output;
  auto list = run_dsx("checkpoint list " + tmp.path());
  EXPECT_EQ(list.exit_code, 0) << list.output;  // list checks sizes only
}

TEST(CheckpointCli, UsageErrors) {
  EXPECT_EQ(run_dsx("checkpoint").exit_code, 2);
  auto bad = run_dsx("checkpoint explode /tmp");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("unknown verb 'explode'"), std::string::npos) << bad.output;
  auto missing = run_dsx("checkpoint verify /nonexistent/dsx/dir");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("/nonexistent/dsx/dir/latest does not exist"), std::string::npos)
      << missing.output;
  EXPECT_EQ(run_dsx("checkpoint --help").exit_code, 0);
}
