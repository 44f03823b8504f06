// `dsx bench comm` as a user runs it: two ranks started by hand with the torchrun environment
// (the way a launcher would), the nccl-tests style table on rank 0, a clean correctness check,
// and usage errors that say what to fix.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "tests/comm/free_port.h"
#include "tests/comm/rank_processes.h"
#include "tests/tools/run_command.h"

namespace dsx::comm {
namespace {

using namespace std::chrono_literals;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs `dsx bench comm <args>` as `world` ranks; returns rank 0's output and the exit codes.
std::pair<std::string, std::vector<int>> run_bench(int world, const std::vector<std::string>& args) {
  uint16_t port = test::free_port();
  std::string out = std::string(DSX_BINARY_DIR) + "/tests/comm/bench-" + std::to_string(port) + ".out";
  test::RankProcesses ranks(world, [&](int rank) {
    setenv("RANK", std::to_string(rank).c_str(), 1);
    setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
    setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
    setenv("FI_TCP_IFACE", "lo", 1);
    setenv("DSX_STORE_TIMEOUT", "30", 1);
    setenv("OMP_NUM_THREADS", "1", 1);
    int fd = ::open((rank == 0 ? out : std::string("/dev/null")).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<const char*> argv{DSX_EXE, "bench", "comm"};
    for (const auto& a : args) argv.push_back(a.c_str());
    argv.push_back(nullptr);
    ::execv(DSX_EXE, const_cast<char* const*>(argv.data()));
    ::_exit(127);
  });
  auto codes = ranks.wait(60s);
  std::string text = read_file(out);
  std::remove(out.c_str());
  return {text, codes};
}

TEST(BenchComm, PrintsTheTableWithBusBandwidthAndAPassingCheck) {
  auto [text, codes] = run_bench(2, {"--op", "allreduce", "-b", "4K", "-e", "64K", "-n", "3", "-w", "1", "--provider", "tcp",
                                     "--timeout", "20"});
  EXPECT_EQ(codes, (std::vector<int>{0, 0})) << text;
  EXPECT_NE(text.find("allreduce, fp32, sum, 2 ranks, backend ofi/tcp"), std::string::npos) << text;
  EXPECT_NE(text.find("algbw(GB/s)"), std::string::npos) << text;
  EXPECT_NE(text.find("Out of bounds values : 0 OK"), std::string::npos) << text;
  // 4K, 8K, 16K, 32K, 64K: five rows, each with time, algbw, busbw and zero wrong. With two ranks
  // nccl-tests' allreduce factor 2(n-1)/n is 1, so busbw equals algbw.
  std::istringstream lines(text);
  int rows = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    size_t size, count;
    std::string type, redop, wrong;
    double us, algbw, busbw;
    f >> size >> count >> type >> redop >> us >> algbw >> busbw >> wrong;
    EXPECT_EQ(size, size_t{4096} << rows) << line;
    EXPECT_EQ(count, size / 4) << line;
    EXPECT_GT(us, 0) << line;
    EXPECT_NEAR(algbw, static_cast<double>(size) / us / 1e3, algbw * 0.02 + 0.002) << line;
    EXPECT_DOUBLE_EQ(busbw, algbw) << line;
    EXPECT_EQ(wrong, "0") << line;
    ++rows;
  }
  EXPECT_EQ(rows, 5) << text;
}

TEST(BenchComm, ReduceScatterUsesTheHalfBusFactorOnTwoRanks) {
  auto [text, codes] = run_bench(2, {"--op", "reduce_scatter", "-d", "bf16", "-o", "max", "-b", "1M", "-e", "1M", "-n", "2",
                                     "-w", "0", "--provider", "shm", "--timeout", "20"});
  EXPECT_EQ(codes, (std::vector<int>{0, 0})) << text;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    size_t size, count;
    std::string type, redop, wrong;
    double us, algbw, busbw;
    f >> size >> count >> type >> redop >> us >> algbw >> busbw >> wrong;
    EXPECT_EQ(type, "bf16");
    EXPECT_EQ(redop, "max");
    EXPECT_NEAR(busbw, algbw / 2, 0.002) << line;  // (n-1)/n
    EXPECT_EQ(wrong, "0");
  }
}

TEST(BenchComm, BadOptionsAndMissingEnvironmentSayWhatToFix) {
  auto bad_op = test::run_dsx("bench comm --op allscatter");
  EXPECT_EQ(bad_op.exit_code, 2);
  EXPECT_NE(bad_op.output.find("unknown --op 'allscatter'"), std::string::npos) << bad_op.output;
  auto bad_size = test::run_dsx("bench comm -b 4X");
  EXPECT_EQ(bad_size.exit_code, 2);
  EXPECT_NE(bad_size.output.find("is not a size"), std::string::npos) << bad_size.output;
  auto no_env = test::run_command("env -u RANK -u WORLD_SIZE " + std::string(DSX_EXE) + " bench comm");
  EXPECT_EQ(no_env.exit_code, 2);
  EXPECT_NE(no_env.output.find("WORLD_SIZE is not set"), std::string::npos) << no_env.output;
  auto unknown = test::run_dsx("bench nothing");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("unknown benchmark 'nothing'"), std::string::npos) << unknown.output;
}

}  // namespace
}  // namespace dsx::comm
