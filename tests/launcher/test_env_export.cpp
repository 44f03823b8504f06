// Environment propagation to other nodes (ref/launcher.md 4.4) and quoting: hostile values are
// run through a real /bin/sh and must come out byte for byte, with no command executed.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "dsx/error.h"
#include "dsx/shell_quote.h"
#include "launcher/env_export.h"
#include "launcher/shell_words.h"
#include "tests/tools/run_command.h"

using namespace dsx::launcher;

namespace {

std::map<std::string, std::string> as_map(const std::vector<EnvVar>& v) { return {v.begin(), v.end()}; }

class TempDir {
 public:
  TempDir() {
    std::string tmpl = testing::TempDir() + "/dsx_env_XXXXXX";
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

TEST(EnvExport, PrefixesAndPythonPath) {
  TempDir home, cwd;
  auto out = as_map(collect_exports({{"NCCL_DEBUG", "INFO"}, {"PYTHONPATH", "/x"}, {"UCX_TLS", "tcp"}, {"PATH", "/bin"},
                                     {"HF_HOME", "/h"}, {"FI_PROVIDER", "tcp"}, {"WANDB_KEY", "k"}, {"AZUREML_RUN_ID", "r"}},
                                    cwd.path(), home.path()));
  EXPECT_EQ(out["NCCL_DEBUG"], "INFO");
  EXPECT_EQ(out["PYTHONPATH"], cwd.path() + ":/x");
  EXPECT_EQ(out["UCX_TLS"], "tcp");
  EXPECT_EQ(out["FI_PROVIDER"], "tcp");
  EXPECT_EQ(out["AZUREML_RUN_ID"], "r");
  EXPECT_EQ(out.count("PATH"), 0u);
  EXPECT_EQ(out.count("HF_HOME"), 0u);
  EXPECT_EQ(out.count("WANDB_KEY"), 0u);
  auto no_pp = as_map(collect_exports({}, cwd.path(), home.path()));
  EXPECT_EQ(no_pp["PYTHONPATH"], cwd.path());
}

TEST(EnvExport, AiscSkipsTwoVariables) {
  TempDir d;
  auto out = as_map(collect_exports({{"AISC_JOB_NAME", "j"}, {"NCCL_IB_HCA", "mlx5"}, {"UCX_NET_DEVICES", "x"}, {"NCCL_X", "1"}},
                                    d.path(), d.path()));
  EXPECT_EQ(out.count("NCCL_IB_HCA"), 0u);
  EXPECT_EQ(out.count("UCX_NET_DEVICES"), 0u);
  EXPECT_EQ(out["NCCL_X"], "1");
}

TEST(EnvExport, DeepspeedEnvFilesHomeThenCwdAndDsEnvFile) {
  TempDir home, cwd;
  std::ofstream(home.path() + "/.deepspeed_env") << "A=home\nB = from home \n";
  std::ofstream(cwd.path() + "/.deepspeed_env") << "# comment\n\nexport A=cwd\nC=x=y\n";
  auto out = as_map(collect_exports({{"NCCL_A", "1"}}, cwd.path(), home.path()));
  EXPECT_EQ(out["A"], "cwd");
  EXPECT_EQ(out["B"], "from home");
  EXPECT_EQ(out["C"], "x=y");
  std::string custom = cwd.path() + "/custom.env";
  std::ofstream(custom) << "D=1\n";
  auto with_file = as_map(collect_exports({{"DS_ENV_FILE", custom}}, cwd.path(), home.path()));
  EXPECT_EQ(with_file["D"], "1");
  EXPECT_EQ(with_file.count("A"), 0u);
}

TEST(EnvExport, BadEnvFileLineIsNamed) {
  try {
    parse_env_file("A=1\nnot a pair\n", "/x/.deepspeed_env");
    FAIL() << "no error";
  } catch (const dsx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/x/.deepspeed_env:2:"), std::string::npos) << e.what();
  }
}

TEST(ShellQuote, SafeWordsUnchanged) {
  EXPECT_EQ(dsx::shell_quote("abc-1.2/x:y@z%+=,"), "abc-1.2/x:y@z%+=,");
  EXPECT_EQ(dsx::shell_quote(""), "''");
  EXPECT_EQ(dsx::shell_quote("a b"), "'a b'");
  EXPECT_EQ(dsx::shell_quote("it's"), "'it'\\''s'");
}

TEST(ShellQuote, HostileValuesSurviveARealShellWithoutSideEffects) {
  TempDir d;
  std::string canary = d.path() + "/pwned";
  std::vector<std::string> hostile = {
      "$(touch " + canary + ")", "`touch " + canary + "`", "'; touch " + canary + "; '", "\"; touch " + canary + "; \"",
      "a\nb; touch " + canary, "$HOME *", "64(x2)", "\\\\ \\' \"", "x;y|z&w>v<u", "${IFS}!#~"};
  for (const auto& value : hostile) {
    std::string script = "export V=" + dsx::shell_quote(value) + "; printf %s \"$V\"";
    auto r = dsx::test::run_command("/bin/sh -c " + dsx::shell_quote(script));
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.output, value);
    struct stat st {};
    EXPECT_NE(::stat(canary.c_str(), &st), 0) << "command injected by " << value;
  }
}

TEST(ShellSplit, LikeShlex) {
  EXPECT_EQ(shell_split("-mca plm_rsh_args \"-p 2222\" --x 'a b' c\\ d"),
            (std::vector<std::string>{"-mca", "plm_rsh_args", "-p 2222", "--x", "a b", "c d"}));
  EXPECT_EQ(shell_split("   "), std::vector<std::string>{});
  EXPECT_THROW(shell_split("'open"), dsx::Error);
  EXPECT_THROW(shell_split("\"open"), dsx::Error);
}
