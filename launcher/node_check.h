// A node's readiness check before it joins an elastic job (`dsx torchrun --nnodes MIN:MAX`):
// `dsx report --check` run as a child of the agent, in the environment the ranks would get, so
// that what it finds (a GPU gone, an interface variable naming no interface, libraries that do
// not match the build) is what the ranks would meet. A child, not a call: the probes load NVML,
// CUDA and libfabric, which the agent that forks the ranks must not hold.
#pragma once

#include <chrono>
#include <string>

namespace dsx::launcher {

struct NodeCheck {
  bool passed = true;
  std::string errors;  // the check's error lines, joined with "; " (empty when it passed)
};

// Runs this binary's `report --check`; one that has not finished within `timeout` is stopped
// and counts as failed (a probe that hangs, e.g. on a GPU that fell off the bus).
NodeCheck run_node_check(std::chrono::seconds timeout);

}  // namespace dsx::launcher
