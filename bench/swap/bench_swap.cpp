// Swap bandwidth of dsx's direct-I/O layer (swap/aio_handle.h) beside fio's O_DIRECT sequential
// write and read with libaio on the same disk, file size, block size and queue depth, measured in
// the same run. Prints one markdown table.
//
//   bench_swap --dir DIR [--mib 1024] [--block_size 1048576] [--queue_depth 8]
//              [--intra_op_parallelism 1] [--reps 3] [--best]
// Each side writes its file, then reads it back; the sides take turns; the best of `reps` counts.
// --best adds each side at its best over a sweep of settings (fio's with huge-page buffers too).
#include <rapidjson/document.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "bench/bench_flags.h"
#include "swap/aio_handle.h"
#include "swap/aligned_buffer.h"
#include "swap/swap_directory.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Setup {
  std::string dir;
  size_t bytes = 0;
  dsx::swap::AioOptions aio;
  int reps = 3;
};

// dsx: one request of the whole file, as a sub-group's swap is one request per state tensor.
class DsxSwap {
 public:
  explicit DsxSwap(const Setup& s)
      : s_(s),
        dir_(s.dir, "bench", 0),
        file_(dir_.create_file("data.swp", s.bytes)),
        buffer_(s.bytes, true),
        handle_(s.aio) {
    for (size_t i = 0; i < s.bytes; i += 4096) buffer_.as<char>()[i] = static_cast<char>(i >> 12);
  }
  double write() {
    return timed([&] { handle_.write(file_, buffer_.data(), s_.bytes, 0); });
  }
  double read() {
    return timed([&] { handle_.read(file_, buffer_.data(), s_.bytes, 0); });
  }

 private:
  template <class F>
  double timed(F&& f) {
    auto t0 = Clock::now();
    f();
    return s_.bytes / std::chrono::duration<double>(Clock::now() - t0).count();
  }
  const Setup& s_;
  dsx::swap::SwapDirectory dir_;
  std::string file_;
  dsx::swap::AlignedBuffer buffer_;
  dsx::swap::AioHandle handle_;
};

// One fio configuration: block size, queue depth, jobs sharing the file, buffer memory.
struct FioConfig {
  size_t bs = 1048576;
  int iodepth = 8;
  int numjobs = 1;
  std::string mem = "malloc";  // fio's --mem: malloc, mmaphuge (hugetlbfs pages), ...
  std::string name() const {
    return "bs " + std::to_string(bs >> 20) + "M, iodepth " + std::to_string(iodepth) + ", " +
           std::to_string(numjobs) + " job(s), --mem=" + mem;
  }
};

// fio's bandwidth (bytes/s) for one sequential pass over `bytes` of `file`: "write" or "read".
// Several jobs split the file into equal parts. 0 when fio fails (missing, or no huge pages).
double fio_bandwidth(const std::string& file, const std::string& rw, size_t bytes,
                     const FioConfig& c) {
  const size_t part = bytes / static_cast<size_t>(c.numjobs);
  const std::string command =
      "fio --name=dsx --filename=" + file + " --rw=" + rw + " --bs=" + std::to_string(c.bs) +
      " --size=" + std::to_string(part) + " --offset_increment=" + std::to_string(part) +
      " --direct=1 --ioengine=libaio --iodepth=" + std::to_string(c.iodepth) +
      " --numjobs=" + std::to_string(c.numjobs) + " --group_reporting --mem=" + c.mem +
      " --output-format=json 2>/dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return 0;
  std::string out;
  char chunk[4096];
  while (size_t n = std::fread(chunk, 1, sizeof chunk, pipe)) out.append(chunk, n);
  ::pclose(pipe);
  rapidjson::Document doc;
  const size_t json = out.find('{');  // fio may print warnings first
  if (json == std::string::npos) return 0;
  doc.Parse(out.c_str() + json);
  if (!doc.IsObject() || !doc.HasMember("jobs") || doc["jobs"].Empty()) return 0;
  if (doc["jobs"][0]["error"].GetInt() != 0) return 0;
  return doc["jobs"][0][rw.c_str()]["bw_bytes"].GetDouble();
}

double fio_bandwidth(const Setup& s, const std::string& file, const std::string& rw) {
  return fio_bandwidth(file, rw, s.bytes,
                       FioConfig{s.aio.block_size, s.aio.queue_depth, 1, "malloc"});
}

struct Best {
  double dsx_write = 0, dsx_read = 0, fio_write = 0, fio_read = 0;
};

// Each side reads right after its own write, and the two take turns going first, so that both
// see the same disk, the same caches below it and the same neighbours.
Best measure(const Setup& s) {
  const std::string fio_file = (std::filesystem::path(s.dir) / "dsx-bench-fio.dat").string();
  DsxSwap dsx(s);
  Best b;
  auto run_dsx = [&] {
    b.dsx_write = std::max(b.dsx_write, dsx.write());
    b.dsx_read = std::max(b.dsx_read, dsx.read());
  };
  auto run_fio = [&] {
    b.fio_write = std::max(b.fio_write, fio_bandwidth(s, fio_file, "write"));
    b.fio_read = std::max(b.fio_read, fio_bandwidth(s, fio_file, "read"));
  };
  for (int r = 0; r < s.reps; ++r) {
    if (r % 2 == 0) {
      run_dsx();
      run_fio();
    } else {
      run_fio();
      run_dsx();
    }
  }
  std::filesystem::remove(fio_file);
  return b;
}

// The best a side reached in one direction, and with which settings.
struct Peak {
  double bandwidth = 0;
  std::string how;
  void offer(double bw, const std::string& settings) {
    if (bw > bandwidth) {
      bandwidth = bw;
      how = settings;
    }
  }
};

struct Peaks {
  Peak dsx_write, dsx_read, fio_write, fio_read;
};

// Each side at its best on this disk: dsx over aio block sizes, queue depths and workers, fio
// over block sizes, iodepths, jobs and buffer memory (hugetlbfs pages where the host has them).
// The sides take turns going first each repetition.
Peaks measure_peaks(const Setup& s) {
  const std::string fio_file = (std::filesystem::path(s.dir) / "dsx-bench-fio.dat").string();
  Peaks p;
  auto run_dsx = [&] {
    for (size_t block : {size_t{1} << 20, size_t{8} << 20})
      for (int depth : {8, 64})
        for (int workers : {1, 2}) {
          Setup t = s;
          t.aio.block_size = block;
          t.aio.queue_depth = depth;
          t.aio.intra_op_parallelism = workers;
          DsxSwap dsx(t);
          const std::string how = "block " + std::to_string(block >> 20) + "M, queue depth " +
                                  std::to_string(depth) + ", " + std::to_string(workers) +
                                  " worker(s)";
          p.dsx_write.offer(dsx.write(), how);
          p.dsx_read.offer(dsx.read(), how);
        }
  };
  auto run_fio = [&] {
    for (size_t bs : {size_t{1} << 20, size_t{8} << 20})
      for (int depth : {8, 64})
        for (int jobs : {1, 2})
          for (const char* mem : {"malloc", "mmaphuge"}) {
            const FioConfig c{bs, depth, jobs, mem};
            p.fio_write.offer(fio_bandwidth(fio_file, "write", s.bytes, c), c.name());
            p.fio_read.offer(fio_bandwidth(fio_file, "read", s.bytes, c), c.name());
          }
  };
  for (int r = 0; r < s.reps; ++r) {
    if (r % 2 == 0) {
      run_dsx();
      run_fio();
    } else {
      run_fio();
      run_dsx();
    }
  }
  std::filesystem::remove(fio_file);
  return p;
}

void print_peak_row(const char* what, const Peak& dsx, const Peak& fio) {
  std::printf("| %s | %.2f | %s | %.2f | %s | %.2f |\n", what, dsx.bandwidth / 1e9,
              dsx.how.c_str(), fio.bandwidth / 1e9, fio.how.c_str(),
              fio.bandwidth > 0 ? dsx.bandwidth / fio.bandwidth : 0.0);
}

void print_row(const char* what, double dsx, double fio) {
  std::printf("| %s | %.2f | %.2f | %.2f |\n", what, dsx / 1e9, fio / 1e9,
              fio > 0 ? dsx / fio : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  Setup s;
  size_t mib = 1024;
  bool best = false;
  po::options_description flags("bench_swap");
  flags.add_options()("help", "this text")("dir", po::value(&s.dir)->required(),
                                           "a directory on the disk to test")(
      "mib", po::value(&mib)->default_value(1024), "file size in MiB")(
      "block_size", po::value(&s.aio.block_size)->default_value(1048576), "aio.block_size")(
      "queue_depth", po::value(&s.aio.queue_depth)->default_value(8),
      "aio.queue_depth (fio's iodepth)")(
      "intra_op_parallelism", po::value(&s.aio.intra_op_parallelism)->default_value(1),
      "aio workers")("reps", po::value(&s.reps)->default_value(3), "repetitions (best counts)")(
      "best", po::bool_switch(&best),
      "also each side at its best: dsx and fio over block sizes, queue depths, workers/jobs and "
      "(fio) huge-page buffers");
  po::variables_map vars;
  if (auto stop = dsx::bench::parse_bench_flags(argc, argv, flags, vars, "bench_swap"))
    return *stop;
  s.bytes = mib << 20;
  try {
    const Best b = measure(s);
    std::printf("%zu MiB file in %s, block %zu B, queue depth %d, %d worker(s), best of %d\n\n",
                mib, s.dir.c_str(), s.aio.block_size, s.aio.queue_depth, s.aio.intra_op_parallelism,
                s.reps);
    std::printf(
        "| O_DIRECT sequential | dsx swap GB/s | fio (libaio) GB/s | dsx / fio "
        "|\n|---|---:|---:|---:|\n");
    print_row("write", b.dsx_write, b.fio_write);
    print_row("read", b.dsx_read, b.fio_read);
    if (b.fio_write == 0 || b.fio_read == 0)
      std::printf("\nfio did not run: install fio (tools/setup.sh does)\n");
    if (best) {
      const Peaks p = measure_peaks(s);
      std::printf("\nEach at its best (%zu MiB, best of %d per setting):\n\n", mib, s.reps);
      std::printf(
          "| O_DIRECT sequential | dsx GB/s | dsx settings | fio GB/s | fio settings | dsx / fio "
          "|\n|---|---:|---|---:|---|---:|\n");
      print_peak_row("write", p.dsx_write, p.fio_write);
      print_peak_row("read", p.dsx_read, p.fio_read);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_swap: %s\n", e.what());
    return 1;
  }
  return 0;
}
