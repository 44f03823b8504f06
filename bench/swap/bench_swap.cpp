// Swap bandwidth of dsx's direct-I/O layer (swap/aio_handle.h) beside fio's O_DIRECT sequential
// write and read with libaio on the same disk, file size, block size and queue depth, measured in
// the same run. Prints one markdown table.
//
//   bench_swap --dir DIR [--mib 1024] [--block_size 1048576] [--queue_depth 8]
//              [--intra_op_parallelism 1] [--reps 3]
// Each side writes its file, then reads it back; the sides take turns; the best of `reps` counts.
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

// fio's bandwidth (bytes/s) for one sequential job: "write" or "read".
double fio_bandwidth(const Setup& s, const std::string& file, const std::string& rw) {
  const std::string command =
      "fio --name=dsx --filename=" + file + " --rw=" + rw +
      " --bs=" + std::to_string(s.aio.block_size) + " --size=" + std::to_string(s.bytes) +
      " --direct=1 --ioengine=libaio --iodepth=" + std::to_string(s.aio.queue_depth) +
      " --numjobs=1 --output-format=json 2>/dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return 0;
  std::string out;
  char chunk[4096];
  while (size_t n = std::fread(chunk, 1, sizeof chunk, pipe)) out.append(chunk, n);
  ::pclose(pipe);
  rapidjson::Document doc;
  doc.Parse(out.c_str());
  if (!doc.IsObject() || !doc.HasMember("jobs") || doc["jobs"].Empty()) return 0;
  return doc["jobs"][0][rw.c_str()]["bw_bytes"].GetDouble();
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

void print_row(const char* what, double dsx, double fio) {
  std::printf("| %s | %.2f | %.2f | %.2f |\n", what, dsx / 1e9, fio / 1e9,
              fio > 0 ? dsx / fio : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  Setup s;
  size_t mib = 1024;
  po::options_description flags("bench_swap");
  flags.add_options()("help", "this text")("dir", po::value(&s.dir)->required(),
                                           "a directory on the disk to test")(
      "mib", po::value(&mib)->default_value(1024), "file size in MiB")(
      "block_size", po::value(&s.aio.block_size)->default_value(1048576), "aio.block_size")(
      "queue_depth", po::value(&s.aio.queue_depth)->default_value(8),
      "aio.queue_depth (fio's iodepth)")(
      "intra_op_parallelism", po::value(&s.aio.intra_op_parallelism)->default_value(1),
      "aio workers")("reps", po::value(&s.reps)->default_value(3), "repetitions (best counts)");
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
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_swap: %s\n", e.what());
    return 1;
  }
  return 0;
}
