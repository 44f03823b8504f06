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

// One row of the nccl-tests style table: size, count, type, redop, time (us), algbw, busbw, #wrong.
struct BenchRow {
  size_t size = 0, count = 0;
  std::string type, redop;
  double us = 0, algbw = 0, busbw = 0;
  std::string wrong;
  std::string line;  // as printed, for the failure messages
};

// The table's rows: every line of rank 0's output that is neither blank nor a '#' comment.
std::vector<BenchRow> table_rows(const std::string& text) {
  std::vector<BenchRow> rows;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    BenchRow& r = rows.emplace_back();
    r.line = line;
    std::istringstream fields(line);
    fields >> r.size >> r.count >> r.type >> r.redop >> r.us >> r.algbw >> r.busbw >> r.wrong;
  }
  return rows;
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
  auto rows = table_rows(text);
  for (size_t i = 0; i < rows.size(); ++i) {
    const BenchRow& r = rows[i];
    EXPECT_EQ(r.size, size_t{4096} << i) << r.line;
    EXPECT_EQ(r.count, r.size / 4) << r.line;
    EXPECT_GT(r.us, 0) << r.line;
    EXPECT_NEAR(r.algbw, static_cast<double>(r.size) / r.us / 1e3, r.algbw * 0.02 + 0.002)
        << r.line;
    EXPECT_DOUBLE_EQ(r.busbw, r.algbw) << r.line;
    EXPECT_EQ(r.wrong, "0") << r.line;
  }
  EXPECT_EQ(rows.size(), 5u) << text;
}

TEST(BenchComm, ReduceScatterUsesTheHalfBusFactorOnTwoRanks) {
  auto [text, codes] = run_bench(2, {"--op", "reduce_scatter", "-d", "bf16", "-o", "max", "-b", "1M", "-e", "1M", "-n", "2",
                                     "-w", "0", "--provider", "shm", "--timeout", "20"});
  EXPECT_EQ(codes, (std::vector<int>{0, 0})) << text;
  for (const BenchRow& r : table_rows(text)) {
    EXPECT_EQ(r.type, "bf16");
    EXPECT_EQ(r.redop, "max");
    EXPECT_NEAR(r.busbw, r.algbw / 2, 0.002) << r.line;  // (n-1)/n
    EXPECT_EQ(r.wrong, "0");
  }
}

TEST(BenchComm, BadOptionsAndMissingEnvironmentSayWhatToFix) {
  EXPECT_TRUE(test::is_usage_error(test::run_dsx("bench comm --op allscatter"),
                                   "unknown --op 'allscatter'"));
  EXPECT_TRUE(test::is_usage_error(test::run_dsx("bench comm -b 4X"), "is not a size"));
  EXPECT_TRUE(test::is_usage_error(
      test::run_command("env -u RANK -u WORLD_SIZE " + std::string(DSX_EXE) + " bench comm"),
      "WORLD_SIZE is not set"));
  EXPECT_TRUE(test::is_usage_error(test::run_dsx("bench nothing"), "unknown benchmark 'nothing'"));
}

}  // namespace
}  // namespace dsx::comm
