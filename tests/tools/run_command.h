// Runs the built `dsx` binary (or any command) in a shell and captures its output and exit code.
// For tests of the command line as a user meets it.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace dsx::test {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

inline CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return result;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

inline CommandResult run_dsx(const std::string& args) {
  return run_command(std::string(DSX_EXE) + " " + args);
}

// A usage error as a user meets it: exit code 2 and a message that names `what` (the flag, value
// or choices to fix). For EXPECT_TRUE(is_usage_error(run_dsx("..."), "--flag")).
inline ::testing::AssertionResult is_usage_error(const CommandResult& r, const std::string& what) {
  if (r.exit_code == 2 && r.output.find(what) != std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "expected exit code 2 naming '" << what << "', got " << r.exit_code << ":\n"
         << r.output;
}

}  // namespace dsx::test
