// Checkpoint save and load of dsx beside the disk's own limit (write + fsync, and read, of the
// same bytes, measured in the same run and directory) and, when given their timings, beside
// safetensors.torch.save_file/load_file and torch.save/load (DeepSpeed's .pt files), all with the
// same tensors (bench/checkpoint/checkpoint_peers.py). Prints one markdown table.
//
//   bench_checkpoint [--dir DIR] [--ranks 2] [--mib 128] [--reps 3] [--peers peers.json]
// Run everything with: bash bench/checkpoint/run_checkpoint.sh
#include <fcntl.h>
#include <rapidjson/document.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_flags.h"
#include "checkpoint/crc32c.h"
#include "checkpoint/layout.h"
#include "checkpoint/load.h"
#include "checkpoint/parallel_bytes.h"
#include "checkpoint/save.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace ck = dsx::checkpoint;

// The best wall and the best CPU seconds of one operation's runs: on a shared machine the fastest
// run is the one least disturbed, and CPU seconds leave out the time spent waiting for a core.
struct Best {
  double wall = 1e30, cpu = 1e30;
};

double cpu_seconds_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The best of `reps` runs after one warm-up (the peers script does the same). `prepare` runs
// untimed before each.
template <class F, class P>
Best best_seconds(int reps, F&& f, P&& prepare) {
  prepare();
  f();
  Best best;
  for (int r = 0; r < reps; ++r) {
    prepare();
    const double cpu0 = cpu_seconds_now();
    auto t0 = Clock::now();
    f();
    best.wall = std::min(best.wall, std::chrono::duration<double>(Clock::now() - t0).count());
    best.cpu = std::min(best.cpu, cpu_seconds_now() - cpu0);
  }
  return best;
}

template <class F>
Best best_seconds(int reps, F&& f) {
  return best_seconds(reps, f, [] {});
}

// The limit: each rank's bytes written in 4 MiB pieces to a fresh file, fsync'd, closed.
void write_fsync(const std::string& path, const std::vector<float>& data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot create " + path);
  const char* p = reinterpret_cast<const char*>(data.data());
  size_t left = data.size() * sizeof(float);
  while (left > 0) {
    ssize_t n = ::write(fd, p, std::min<size_t>(left, 4 << 20));
    if (n <= 0) throw std::runtime_error("write failed: " + path);
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
}

void read_whole(const std::string& path, std::vector<float>& into) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  char* p = reinterpret_cast<char*>(into.data());
  size_t left = into.size() * sizeof(float);
  while (left > 0) {
    ssize_t n = ::read(fd, p, std::min<size_t>(left, 4 << 20));
    if (n <= 0) break;
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::close(fd);
}

std::map<std::string, Best> read_peers(const std::string& path, int ranks, int mib) {
  std::map<std::string, Best> peers;
  if (path.empty()) return peers;
  rapidjson::Document doc = dsx::bench::read_peers_json(path);
  if (!doc.IsObject() || !doc.HasMember("seconds") || !doc["seconds"].IsObject()) {
    std::fprintf(stderr, "bench_checkpoint: %s is not checkpoint_peers.py's JSON; ignoring it\n",
                 path.c_str());
    return peers;
  }
  if (doc["ranks"].GetInt() != ranks || doc["mib"].GetInt() != mib)
    std::fprintf(stderr, "warning: peers ran with %d ranks x %d MiB, dsx with %d x %d\n",
                 doc["ranks"].GetInt(), doc["mib"].GetInt(), ranks, mib);
  for (auto& m : doc["seconds"].GetObject()) peers[m.name.GetString()].wall = m.value.GetDouble();
  if (doc.HasMember("cpu_seconds") && doc["cpu_seconds"].IsObject())
    for (auto& m : doc["cpu_seconds"].GetObject())
      peers[m.name.GetString()].cpu = m.value.GetDouble();
  return peers;
}

// What every measurement shares: where it writes, and each rank's partition.
struct Workload {
  std::string dir;
  int ranks = 2, reps = 3;
  size_t numel = 0;  // floats per rank
  std::vector<std::vector<float>> partitions;
  std::string raw_file(int r) const { return dir + "/raw_" + std::to_string(r); }
};

std::vector<std::vector<float>> make_partitions(int ranks, size_t numel) {
  std::vector<std::vector<float>> partitions(static_cast<size_t>(ranks), std::vector<float>(numel));
  for (int r = 0; r < ranks; ++r)
    for (size_t i = 0; i < numel; ++i) partitions[r][i] = static_cast<float>(i % 1009) * 0.001f + r;
  return partitions;
}

// The disk's write limit, then dsx's save of the same bytes with either commit check.
void time_saves(const Workload& w, std::map<std::string, Best>& seconds) {
  // New files each time, as a save writes them (the old ones are removed untimed).
  auto remove_raw = [&] {
    for (int r = 0; r < w.ranks; ++r) std::filesystem::remove(w.raw_file(r));
  };
  seconds["write+fsync"] = best_seconds(
      w.reps,
      [&] {
        for (int r = 0; r < w.ranks; ++r) write_fsync(w.raw_file(r), w.partitions[r]);
      },
      remove_raw);
  // Each save is a new tag, as training saves are; the previous one is removed untimed.
  int save_count = 0;
  auto remove_previous = [&] {
    std::filesystem::remove_all(w.dir + "/" + ck::default_tag(save_count));
  };
  auto dsx_save = [&](ck::VerifyLevel verify) {
    const std::string tag = ck::default_tag(++save_count);
    std::vector<ck::RankManifest> manifests;
    for (int r = 0; r < w.ranks; ++r) {
      ck::RankWriter writer(w.dir, tag, r);
      ck::TensorRef t{
          "master.0", ck::TensorDType::F32, {static_cast<int64_t>(w.numel)}, w.partitions[r].data()};
      writer.write_tensor_file(ck::zero_optim_states_file_name(r, false), {&t, 1}, "{\"step\":1}");
      manifests.push_back(writer.manifest());
    }
    ck::commit(w.dir, tag, manifests, {verify});
  };
  seconds["dsx save"] = best_seconds(
      w.reps, [&] { dsx_save(ck::VerifyLevel::Checksum); }, remove_previous);
  seconds["dsx save, sizes only"] = best_seconds(
      w.reps, [&] { dsx_save(ck::VerifyLevel::Size); }, remove_previous);
}

// What the peers do with each loaded tensor (torch's .sum()): every byte is read once, in wide
// vectors with four partial sums (as torch's vectorized sum), so the row is bound by memory; an
// AVX-512 clone where the CPU has it, as torch dispatches to one.
__attribute__((target_clones("avx512f", "default"))) float sum_of(const float* p, size_t n) {
  using Floats = float __attribute__((vector_size(64)));
  Floats a{}, b{}, c{}, d{};
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    Floats x[4];
    std::memcpy(x, p + i, sizeof x);
    a += x[0];
    b += x[1];
    c += x[2];
    d += x[3];
  }
  const Floats all = a + b + c + d;
  float total = 0;
  for (int j = 0; j < 16; ++j) total += all[j];
  for (; i < n; ++i) total += p[i];
  return total;
}

// The read limit (from the page cache), dsx's load of what time_saves wrote (copied out into the
// engine's buffers, or used in place as the peers use theirs), and CRC32C alone per kernel.
void time_loads(const Workload& w, std::map<std::string, Best>& seconds) {
  std::vector<float> into(w.numel);
  volatile float sink = 0;
  seconds["read"] = best_seconds(w.reps, [&] {
    for (int r = 0; r < w.ranks; ++r) read_whole(w.raw_file(r), into);
  });
  seconds["dsx load"] = best_seconds(w.reps, [&] {
    auto reader = ck::CheckpointReader::open(w.dir);
    for (int r = 0; r < w.ranks; ++r)
      reader.read_tensor_file(ck::zero_optim_states_file_name(r, false))
          .read("master.0", ck::TensorDType::F32, into.data(), w.numel);
  });
  seconds["dsx load, one pass"] = best_seconds(w.reps, [&] {
    auto reader = ck::CheckpointReader::open(w.dir);
    for (int r = 0; r < w.ranks; ++r) {
      const ck::TensorDestination to{"master.0", ck::TensorDType::F32, into.data(), w.numel};
      reader.read_tensor_file_into(ck::zero_optim_states_file_name(r, false), {&to, 1});
    }
  });
  seconds["dsx load, in place"] = best_seconds(w.reps, [&] {
    auto reader = ck::CheckpointReader::open(w.dir);
    for (int r = 0; r < w.ranks; ++r) {
      const auto file = reader.read_tensor_file(ck::zero_optim_states_file_name(r, false));
      const auto& view = file.view("master.0");
      sink = sink + sum_of(reinterpret_cast<const float*>(view.data), view.numel());
    }
  });
  seconds["dsx load, sum in one pass"] = best_seconds(w.reps, [&] {
    auto reader = ck::CheckpointReader::open(w.dir);
    const ck::TensorToVisit master{"master.0", ck::TensorDType::F32, w.numel};
    for (int r = 0; r < w.ranks; ++r) {
      float total = 0;  // each piece is a whole number of floats: blocks and tensors are aligned
      reader.read_tensor_file_visiting(ck::zero_optim_states_file_name(r, false), {&master, 1},
                                       [&](size_t, uint64_t, const uint8_t* bytes, size_t size) {
                                         total += sum_of(reinterpret_cast<const float*>(bytes),
                                                         size / sizeof(float));
                                       });
      sink = sink + total;
    }
  });
  for (auto kernel : {ck::Crc32cKernel::Portable, ck::Crc32cKernel::Sse42, ck::Crc32cKernel::Pclmul,
                      ck::Crc32cKernel::Vpclmul}) {
    if (!ck::crc32c_kernel_available(kernel)) continue;
    seconds[std::string("crc32c: ") + ck::crc32c_kernel_name(kernel)] = best_seconds(w.reps, [&] {
      uint32_t crc = 0;
      for (int r = 0; r < w.ranks; ++r)
        crc ^= ck::crc32c_extend_with(kernel, 0, w.partitions[r].data(), w.numel * 4);
      sink = sink + static_cast<float>(crc & 1);
    });
  }
  // The one-pass load with its pieces on two threads, which a machine of few cores does not use.
  ::setenv("DSX_CHECKPOINT_THREADS", "2", 1);
  seconds["dsx load, one pass, 2 threads"] = best_seconds(w.reps, [&] {
    auto reader = ck::CheckpointReader::open(w.dir);
    for (int r = 0; r < w.ranks; ++r) {
      const ck::TensorDestination to{"master.0", ck::TensorDType::F32, into.data(), w.numel};
      reader.read_tensor_file_into(ck::zero_optim_states_file_name(r, false), {&to, 1});
    }
  });
  ::unsetenv("DSX_CHECKPOINT_THREADS");
  // The dispatched kernel on two threads' pieces, which a machine of few cores does not use.
  ::setenv("DSX_CHECKPOINT_THREADS", "2", 1);
  const std::string dispatched = ck::crc32c_kernel_name(ck::crc32c_fastest_kernel());
  seconds["crc32c: " + dispatched + ", pieces on 2 threads"] = best_seconds(w.reps, [&] {
    uint32_t crc = 0;
    for (int r = 0; r < w.ranks; ++r) crc ^= ck::crc32c_parallel(w.partitions[r].data(), w.numel * 4);
    sink = sink + static_cast<float>(crc & 1);
  });
  ::unsetenv("DSX_CHECKPOINT_THREADS");
}

// Seconds of an older build's load rows, timed in the same run by run_checkpoint.sh (0: none).
struct Baseline {
  double load = 0, in_place = 0;
};

// One row per operation: dsx's and the peers' saves against the write limit, loads against the read limit.
void print_table(double gb, std::map<std::string, Best>& seconds,
                 std::map<std::string, Best>& peers, const Baseline& baseline) {
  std::printf(
      "| operation | seconds | GB/s | speed vs the limit | CPU seconds |\n"
      "|---|---:|---:|---:|---:|\n");
  auto row = [&](const char* label, Best s, Best limit) {
    std::printf("| %s | %.3f | %.2f | %.2f | ", label, s.wall, gb / s.wall, limit.wall / s.wall);
    if (s.cpu < 1e29)
      std::printf("%.3f |\n", s.cpu);
    else
      std::printf("- |\n");  // an older build's rows, and peers' from an older script
  };
  const Best w = seconds["write+fsync"], r = seconds["read"];
  row("write + fsync of the same bytes (limit)", w, w);
  row("dsx save: temp, fsync, rename, dir fsync, CRC verify, latest", seconds["dsx save"], w);
  row("dsx save, commit checks sizes only", seconds["dsx save, sizes only"], w);
  if (peers.count("safetensors_save"))
    row("safetensors.torch.save_file + fsync", peers["safetensors_save"], w);
  if (peers.count("torch_save"))
    row("torch.save + fsync (DeepSpeed's .pt)", peers["torch_save"], w);
  row("read of the same bytes, page cache (limit)", r, r);
  if (baseline.load > 0) row("BASELINE build: dsx load, copy out", {baseline.load}, r);
  row("dsx load: open, CRC verify, parse, copy out", seconds["dsx load"], r);
  row("dsx load into buffers, CRC and copy in one pass", seconds["dsx load, one pass"], r);
  row("dsx load into buffers, one pass, pieces on 2 threads",
      seconds["dsx load, one pass, 2 threads"], r);
  if (baseline.in_place > 0) row("BASELINE build: dsx load, sum in place", {baseline.in_place}, r);
  row("dsx load: open, CRC verify, parse, sum in place", seconds["dsx load, in place"], r);
  row("dsx load: CRC and sum in one pass, in place", seconds["dsx load, sum in one pass"], r);
  if (peers.count("safetensors_load"))
    row("safetensors.torch.load_file + sum (no check)", peers["safetensors_load"], r);
  if (peers.count("safetensors_load_copy"))
    row("safetensors.torch.load_file + copy into buffers (no check)",
        peers["safetensors_load_copy"], r);
  if (peers.count("torch_load")) row("torch.load (DeepSpeed's .pt) + sum", peers["torch_load"], r);
  std::printf("\n| CRC32C alone, in memory (dispatch: %s) | GB/s |\n|---|---:|\n",
              ck::crc32c_kernel_name(ck::crc32c_fastest_kernel()));
  for (const auto& [name, s] : seconds)
    if (name.starts_with("crc32c: ")) std::printf("| %s | %.2f |\n", name.c_str() + 8, gb / s.wall);
}

}  // namespace

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  Workload w;
  std::string peers_path;
  int mib = 128;
  Baseline baseline;
  po::options_description options("bench_checkpoint options");
  options.add_options()("help", "this help")(
      "dir", po::value(&w.dir), "directory to save in (default: a new one in $TMPDIR)")(
      "ranks", po::value(&w.ranks), "ranks, one partition file each")(
      "mib", po::value(&mib), "MiB per rank")("reps", po::value(&w.reps),
                                              "timed repetitions (best is reported)")(
      "peers", po::value(&peers_path), "JSON written by bench/checkpoint/checkpoint_peers.py")(
      "baseline-load", po::value(&baseline.load),
      "seconds of an older build's copy-out load row in the same run (run_checkpoint.sh BASELINE=)")(
      "baseline-in-place", po::value(&baseline.in_place),
      "seconds of an older build's in-place load row in the same run");
  po::variables_map vars;
  if (auto stop = dsx::bench::parse_bench_flags(argc, argv, options, vars, "bench_checkpoint"))
    return *stop;
  bool own_dir = w.dir.empty();
  if (own_dir) {
    std::string templ = (std::filesystem::temp_directory_path() / "dsx-bench-ckpt-XXXXXX").string();
    if (!::mkdtemp(templ.data())) return 1;
    w.dir = templ;
  }
  w.numel = static_cast<size_t>(mib) << 18;
  w.partitions = make_partitions(w.ranks, w.numel);
  const double gb = static_cast<double>(w.ranks) * static_cast<double>(w.numel) * 4 / 1e9;

  std::map<std::string, Best> seconds;
  time_saves(w, seconds);
  time_loads(w, seconds);
  auto peers = read_peers(peers_path, w.ranks, mib);
  if (own_dir) std::filesystem::remove_all(w.dir);

  std::printf("checkpoint of %d ranks x %d MiB fp32 (%.2f GB), best of %d, in %s\n\n", w.ranks, mib,
              gb, w.reps, own_dir ? "$TMPDIR" : w.dir.c_str());
  print_table(gb, seconds, peers, baseline);
  return 0;
}
