// The `dsx` binary as a user meets it: help, unknown commands, version.
#include <gtest/gtest.h>

#include "tests/tools/run_command.h"

using dsx::test::run_dsx;

TEST(DsxCli, HelpListsEveryCommand) {
  auto r = run_dsx("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("usage: dsx <command>"), std::string::npos);
  EXPECT_NE(r.output.find("version"), std::string::npos);
}

TEST(DsxCli, NoCommandIsAUsageError) {
  auto r = run_dsx("");
  EXPECT_EQ(r.exit_code, 2);
}

TEST(DsxCli, UnknownCommandIsNamed) {
  auto r = run_dsx("frobnicate");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unknown command 'frobnicate'"), std::string::npos);
}

TEST(DsxCli, UnknownOptionIsAUsageError) {
  auto r = run_dsx("version --bogus");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("bogus"), std::string::npos);
}

TEST(DsxCli, VersionPrintsTheProjectVersion) {
  auto r = run_dsx("version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("dsx 0."), std::string::npos);
}
