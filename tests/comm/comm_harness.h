// Starts a small job of real ranks for the communicator tests: N forked processes that meet
// through a store on 127.0.0.1 (a free port), open the ofi backend on the loopback interface
// only, and run a test body. A body reports a wrong result by throwing; the harness turns that
// into the child's exit code and its message into a file the parent reads.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "comm/session.h"
#include "tests/comm/free_port.h"
#include "tests/comm/rank_processes.h"

namespace dsx::test {

struct JobResult {
  std::vector<int> exit_codes;
  std::vector<std::string> errors;  // what each rank threw ("" if nothing)
  bool all_ok() const {
    for (int c : exit_codes) {
      if (c != 0) return false;
    }
    return true;
  }
  std::string summary() const {
    std::ostringstream out;
    for (size_t r = 0; r < exit_codes.size(); ++r) out << "rank " << r << ": exit " << exit_codes[r] << " " << errors[r] << "\n";
    return out.str();
  }
};

// Loopback only: providers must never touch another interface in tests.
inline void use_loopback_only() {
  setenv("FI_TCP_IFACE", "lo", 1);
  setenv("FI_SOCKETS_IFACE", "lo", 1);
  setenv("OMP_NUM_THREADS", "1", 1);  // ranks share two cores
}

inline std::string read_and_remove(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path.c_str());
  return text.str();
}

// Runs `body` as `world` ranks. The store port is picked free just before the ranks start; if
// another process grabs it in between, rank 0 fails to listen and the job is retried on a new one.
// `options_of` gives each rank its options (run_job below gives every rank the same).
inline JobResult run_job_with(int world, const std::function<comm::CommOptions(int rank)>& options_of,
                              const std::function<void(comm::Communicator&, int rank)>& body,
                              std::chrono::milliseconds limit = std::chrono::seconds(60),
                              const std::function<void(int rank)>& child_setup = {},
                              const std::vector<int>& frozen_ranks = {}) {
  std::string dir = std::string(DSX_BINARY_DIR) + "/tests/comm";
  // A GPU test run from a bundle (tools/gpu_bundle.sh) is far from the build folder.
  if (!std::filesystem::is_directory(dir)) dir = std::filesystem::temp_directory_path().string();
  for (int attempt = 0;; ++attempt) {
    uint16_t port = free_port();
    std::string stem = dir + "/job-" + std::to_string(getpid()) + "-" + std::to_string(port) + "-rank";
    RankProcesses ranks(world, [&](int rank) {
      use_loopback_only();
      setenv("DSX_STORE_TIMEOUT", "30", 1);
      if (child_setup) child_setup(rank);
      try {
        comm::Session session(comm::RankEnv{rank, world, rank, {"127.0.0.1", port}}, options_of(rank));
        body(session.world(), rank);
      } catch (const std::exception& e) {
        std::ofstream(stem + std::to_string(rank)) << e.what();  // parent reads it after the exit
        throw;
      }
    });
    std::string rank0_error;
    bool rank0_read = false;
    auto port_taken = [&](const std::vector<int>& codes) {
      if (codes[0] <= 0) return false;
      if (!rank0_read) rank0_error = read_and_remove(stem + "0");
      rank0_read = true;
      return rank0_error.find("address already in use") != std::string::npos;
    };
    JobResult result;
    result.exit_codes = ranks.wait(limit, frozen_ranks, port_taken);
    if (port_taken(result.exit_codes) && attempt < 3) continue;  // the destructor kills the other ranks
    for (int r = 0; r < world; ++r) {
      std::string text = read_and_remove(stem + std::to_string(r));
      result.errors.push_back(r == 0 && text.empty() ? rank0_error : text);
    }
    return result;
  }
}

inline JobResult run_job(int world, comm::CommOptions options,
                         const std::function<void(comm::Communicator&, int rank)>& body,
                         std::chrono::milliseconds limit = std::chrono::seconds(60),
                         const std::function<void(int rank)>& child_setup = {},
                         const std::vector<int>& frozen_ranks = {}) {
  return run_job_with(world, [&](int) { return options; }, body, limit, child_setup, frozen_ranks);
}

inline comm::CommOptions test_options(const std::string& provider) {
  comm::CommOptions options;
  options.backend = "ofi";
  options.provider = provider;
  options.timeout = std::chrono::seconds(20);
  options.chunk_bytes = 1024;  // several chunks per block even for small test buffers
  options.small_bytes = 256;   // both allreduce algorithms run
  options.shared_memory_chunk_bytes = 256;  // shm: many rounds per allreduce, slots reused
  options.shared_memory_one_shot_bytes = 64; // shm: both allreduce forms run
  return options;
}

}  // namespace dsx::test
