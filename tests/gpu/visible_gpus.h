// How many GPUs CUDA sees, asked in a child process, so that the test process itself never
// creates a CUDA context before it forks its ranks.
#pragma once

#include <cuda_runtime.h>
#include <unistd.h>

#include <chrono>

#include "tests/comm/rank_processes.h"

namespace dsx::test {

inline int visible_gpus() {
  RankProcesses probe(1, [](int) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    ::_exit(n);
  });
  return probe.wait(std::chrono::seconds(60))[0];
}

}  // namespace dsx::test
