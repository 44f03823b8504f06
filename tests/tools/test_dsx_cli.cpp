// The `dsx` binary as a user meets it: help, unknown commands, version.
#include <gtest/gtest.h>

#include "kernels/cpu/blas_kernels.h"
#include "kernels/simd.h"
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

// A CPU newer than the OpenBLAS library (which then falls back to its SSE3 kernels) still gets
// the AVX2 or AVX-512 kernels it can run: dsx executes itself again with OPENBLAS_CORETYPE set.
TEST(DsxCli, RunsOnBlasKernelsAsNewAsTheCpu) {
  auto r = dsx::test::run_command("env -u OPENBLAS_CORETYPE " + std::string(DSX_EXE) + " version");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string key = "blas kernels: ";
  const size_t at = r.output.find(key);
  ASSERT_NE(at, std::string::npos) << r.output;
  const std::string core = r.output.substr(at + key.size(), r.output.find('\n', at) - at - key.size());
  EXPECT_EQ(dsx::kernels::cpu::blas_core_upgrade(core, dsx::kernels::detected_simd_level(), false), "")
      << "dsx runs OpenBLAS's " << core << " kernels on a CPU with " << dsx::kernels::simd_level_name(dsx::kernels::detected_simd_level());
}

// A core the user set is theirs: dsx does not replace it.
TEST(DsxCli, KeepsTheBlasKernelsTheUserForced) {
  auto r = dsx::test::run_command("env OPENBLAS_CORETYPE=Haswell " + std::string(DSX_EXE) + " version");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  if (r.output.find("DYNAMIC_ARCH") == std::string::npos)
    GTEST_SKIP() << "this OpenBLAS has one kernel set, which OPENBLAS_CORETYPE cannot change";
  EXPECT_NE(r.output.find("blas kernels: Haswell\n"), std::string::npos) << r.output;
}

// issue 33, item 17: a stray word is refused by name, not silently ignored.
TEST(DsxCli, StrayWordsAreRefusedByName) {
  for (const char* args : {"version extra", "report extra", "estimate --model gpt2 extra",
                           "train --deepspeed_config ds.json extra"}) {
    auto r = run_dsx(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("unexpected word 'extra'"), std::string::npos)
        << args << "\n" << r.output;
  }
}
