// Swap bandwidth of dsx's direct-I/O layer (swap/aio_handle.h) beside fio's O_DIRECT sequential
// write and read with libaio, on the same disk, in the same run. Prints markdown tables.
//
//   bench_swap --dir DIR [--mib 512] [--rounds 5] [--setting MiB,depth,workers ...] [--no_thp]
// Both sides sweep the same grid: block size 1M/8M x queue depth 8/64 x workers 1/2 (fio: --bs,
// --iodepth, --numjobs; dsx: aio block_size, queue_depth, intra_op_parallelism). Each round runs
// every setting on both sides, dsx and fio taking turns going first, each side reading right
// after its own write. A side's best setting is the one with the highest median; its median and
// best over the rounds are reported beside the other side's at its own best setting.
//
// Like with like: at every setting each side first reserves its file afresh (fallocate: unwritten
// extents the file system converts as the write lands) and times that first write, then times a
// second write over the now written blocks (what a swap file sees from its second step on: it is
// reserved once and never extended), then the read. fio runs with --fallocate=none on the file
// reserved for it, so neither side's timed write extends or lays out a file.
// dsx's buffers are transparent huge pages (swap/aligned_buffer.cpp), fio's malloc'd ones are not:
// --no_thp turns them off for this process, so both sides pin 4 KiB pages.
#include <sys/prctl.h>

#include <algorithm>
#include <array>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/bench_flags.h"
#include "bench/swap/fio_pass.h"
#include "swap/aio_handle.h"
#include "swap/aligned_buffer.h"
#include "swap/swap_directory.h"

namespace {

using dsx::swap::IoKind;

// One point of the grid; fio reads `workers` as --numjobs.
struct Setting {
  size_t block;
  int depth;
  int workers;
  std::string name(const char* workers_word) const {
    return "block " + std::to_string(block >> 20) + "M, depth " + std::to_string(depth) + ", " +
           std::to_string(workers) + " " + workers_word;
  }
};

// "8,64,2": block MiB, queue depth, workers; empty when malformed.
std::optional<Setting> parse_setting(const std::string& text) {
  size_t mib = 0;
  int depth = 0, workers = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%zu,%d,%d%c", &mib, &depth, &workers, &tail) != 3 || mib == 0 ||
      depth < 1 || workers < 1)
    return std::nullopt;
  return Setting{mib << 20, depth, workers};
}

std::vector<Setting> sweep_grid(const std::vector<std::string>& only) {
  std::vector<Setting> grid;
  for (const std::string& text : only) {
    const auto s = parse_setting(text);
    if (!s) throw std::invalid_argument("--setting " + text + ": expected MiB,depth,workers");
    grid.push_back(*s);
  }
  if (!grid.empty()) return grid;
  for (size_t block : {size_t{1} << 20, size_t{8} << 20})
    for (int depth : {8, 64})
      for (int workers : {1, 2}) grid.push_back({block, depth, workers});
  return grid;
}

// The two files under test, side by side in one scratch directory, and dsx's buffer.
class Disk {
 public:
  Disk(const std::string& dir, size_t bytes)
      : bytes_(bytes), dir_(dir, "bench", 0), buffer_(bytes, true) {
    char* b = buffer_.as<char>();
    for (size_t i = 0; i < bytes; i += 4096) b[i] = static_cast<char>(i >> 12);
    reserve(dsx_file_);
    reserve(fio_file_);
  }
  // A fresh file: the old blocks freed, the space reserved again as unwritten extents.
  void reserve(const std::string& name) { dir_.create_file(name, bytes_); }
  std::string path(const std::string& name) const { return dir_.path() + "/" + name; }

  // dsx's bandwidth (bytes/s) for one pass; the handle's threads start outside the timing.
  double dsx_pass(IoKind kind, const Setting& s) {
    dsx::swap::AioHandle handle(
        {.block_size = s.block, .queue_depth = s.depth, .intra_op_parallelism = s.workers});
    const auto t0 = std::chrono::steady_clock::now();
    if (kind == IoKind::Write) {
      handle.write(path(dsx_file_), buffer_.data(), bytes_, 0);
    } else {
      handle.read(path(dsx_file_), buffer_.data(), bytes_, 0);
    }
    return bytes_ / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  double fio_pass(IoKind kind, const Setting& s) const {
    return dsx::bench::fio_bandwidth({.file = path(fio_file_),
                                      .rw = kind == IoKind::Write ? "write" : "read",
                                      .bytes = bytes_,
                                      .bs = s.block,
                                      .iodepth = s.depth,
                                      .numjobs = s.workers});
  }
  const std::string dsx_file_ = "dsx.swp";
  const std::string fio_file_ = "fio.dat";

 private:
  size_t bytes_;
  dsx::swap::SwapDirectory dir_;
  dsx::swap::AlignedBuffer buffer_;
};

enum Side { kDsx, kFio };
constexpr std::array<Side, 2> kSides{kDsx, kFio};

// What one pass at a setting times, in the order they run.
enum Pass { kFreshWrite, kOverwrite, kRead };
constexpr std::array<const char*, 3> kPassNames{"write (fresh fallocated file)",
                                                "write (overwrite)", "read"};

// Bandwidths per side, pass and grid point, one per round.
using Samples = std::array<std::array<std::vector<std::vector<double>>, 3>, 2>;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double best(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

double pass(Disk& disk, Side side, IoKind kind, const Setting& s) {
  return side == kDsx ? disk.dsx_pass(kind, s) : disk.fio_pass(kind, s);
}

// The sides take turns going first, alternating by round and by grid point, so that both meet
// the same disk, caches below it and neighbours' load.
Samples sweep(Disk& disk, const std::vector<Setting>& grid, int rounds) {
  Samples samples;
  for (auto& side : samples)
    for (auto& direction : side) direction.resize(grid.size());
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < grid.size(); ++i) {
      const bool fio_first = (static_cast<size_t>(r) + i) % 2 == 1;
      for (Side side : fio_first ? std::array{kFio, kDsx} : kSides) {
        disk.reserve(side == kDsx ? disk.dsx_file_ : disk.fio_file_);
        samples[side][kFreshWrite][i].push_back(pass(disk, side, IoKind::Write, grid[i]));
        samples[side][kOverwrite][i].push_back(pass(disk, side, IoKind::Write, grid[i]));
        samples[side][kRead][i].push_back(pass(disk, side, IoKind::Read, grid[i]));
      }
    }
  return samples;
}

size_t best_setting(const std::vector<std::vector<double>>& by_setting) {
  size_t top = 0;
  for (size_t i = 1; i < by_setting.size(); ++i)
    if (median(by_setting[i]) > median(by_setting[top])) top = i;
  return top;
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

void print_grid(const std::vector<Setting>& grid, const Samples& s) {
  std::printf(
      "| block, queue depth, workers (fio: jobs) | dsx fresh write | fio fresh write | dsx "
      "overwrite | fio overwrite | dsx read | fio read |\n|---|---:|---:|---:|---:|---:|---:|\n");
  for (size_t i = 0; i < grid.size(); ++i) {
    std::printf("| %zuM, %d, %d |", grid[i].block >> 20, grid[i].depth, grid[i].workers);
    for (Pass p : {kFreshWrite, kOverwrite, kRead})
      std::printf(" %.2f | %.2f |", median(s[kDsx][p][i]) / 1e9, median(s[kFio][p][i]) / 1e9);
    std::printf("\n");
  }
}

void print_best_row(const char* what, const std::array<Setting, 2>& at,
                    const std::array<std::vector<double>, 2>& v) {
  const double dm = median(v[kDsx]), db = best(v[kDsx]);
  const double fm = median(v[kFio]), fb = best(v[kFio]);
  std::printf("| %s | %s | %.2f | %.2f | %s | %.2f | %.2f | %.2f | %.2f |\n", what,
              at[kDsx].name("worker(s)").c_str(), dm / 1e9, db / 1e9,
              at[kFio].name("job(s)").c_str(), fm / 1e9, fb / 1e9, fm > 0 ? dm / fm : 0.0,
              fb > 0 ? db / fb : 0.0);
}

void report(const std::vector<Setting>& grid, const Samples& s, int rounds) {
  std::printf("Median GB/s of %d rounds at every setting:\n\n", rounds);
  print_grid(grid, s);
  std::printf(
      "\nEach side at its best setting (highest median), median and best of %d rounds, GB/s:\n\n"
      "| O_DIRECT sequential | dsx setting | dsx median | dsx best | fio setting | fio median | "
      "fio best | dsx / fio median | dsx / fio best |\n"
      "|---|---|---:|---:|---|---:|---:|---:|---:|\n",
      rounds);
  for (Pass p : {kOverwrite, kFreshWrite, kRead}) {
    std::array<Setting, 2> at{};
    std::array<std::vector<double>, 2> v;
    for (Side side : kSides) {
      const size_t i = best_setting(s[side][p]);
      at[side] = grid[i];
      v[side] = s[side][p][i];
    }
    print_best_row(kPassNames[p], at, v);
  }
}

}  // namespace

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  std::string dir;
  size_t mib = 512;
  int rounds = 5;
  std::vector<std::string> only;
  bool no_thp = false;
  po::options_description flags("bench_swap");
  flags.add_options()("help", "this text")("dir", po::value(&dir)->required(),
                                           "a directory on the disk to test")(
      "mib", po::value(&mib)->default_value(512), "file size in MiB (a multiple of 16)")(
      "rounds", po::value(&rounds)->default_value(5), "rounds of the sweep (median and best)")(
      "setting", po::value(&only)->composing(),
      "MiB,depth,workers: sweep only these settings (repeatable), e.g. --setting 8,64,2")(
      "no_thp", po::bool_switch(&no_thp),
      "dsx's buffers in 4 KiB pages, as fio's are (no transparent huge pages)");
  po::variables_map vars;
  if (auto stop = dsx::bench::parse_bench_flags(argc, argv, flags, vars, "bench_swap"))
    return *stop;
  if (mib == 0 || mib % 16 != 0 || rounds < 1) {
    std::fprintf(stderr, "bench_swap: --mib must be a positive multiple of 16, --rounds >= 1\n");
    return 2;
  }
  try {
    const std::vector<Setting> grid = sweep_grid(only);
    if (no_thp && ::prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0) {
      throw std::runtime_error("--no_thp: prctl(PR_SET_THP_DISABLE) failed");
    }
    const std::string load_before = load_average();
    Disk disk(dir, mib << 20);
    const Samples samples = sweep(disk, grid, rounds);
    std::printf("%zu MiB files in %s, %d rounds%s; load average %s before, %s after the sweep\n\n",
                mib, dir.c_str(), rounds, no_thp ? ", dsx without huge pages" : "",
                load_before.c_str(), load_average().c_str());
    report(grid, samples, rounds);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_swap: %s\n", e.what());
    return 1;
  }
  return 0;
}
