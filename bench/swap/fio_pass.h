// One timed fio pass, the peer of bench_swap: an O_DIRECT sequential write or read of a file
// that already exists at full size (fio neither creates nor extends it), with libaio, as fio's
// own JSON reports its bandwidth.
#pragma once

#include <cstddef>
#include <string>

namespace dsx::bench {

struct FioJob {
  std::string file;
  std::string rw;  // "write" or "read"
  size_t bytes = 0;
  size_t bs = 1'048'576;
  int iodepth = 8;
  int numjobs = 1;  // the jobs split the file into equal, contiguous parts
};

// fio's command line for `job`.
std::string fio_command(const FioJob& job);

// Runs fio and returns its bandwidth in bytes/s; throws std::runtime_error quoting fio's output
// when fio is missing or fails.
double fio_bandwidth(const FioJob& job);

}  // namespace dsx::bench
