// The training thread's blocking host synchronisations, step by step, as the emulated GPU counts
// them (dsx::emu::host_syncs_of_this_thread: NCCL's watchdog polls on its own thread). On a real
// GPU nothing is counted and nothing is asserted: the tests check their numbers only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#ifdef DSX_CUDA_EMULATED
#include "tests/emulated_gpu/emulated_gpu.h"
#endif

namespace dsx::test {

class StepSyncs {
 public:
  void begin_step() { before_ = now(); }
  void end_step() {
#ifdef DSX_CUDA_EMULATED
    per_step_.push_back(now() - before_);
#endif
  }
  const std::vector<uint64_t>& per_step() const { return per_step_; }

  // "NAME: host syncs per step 2 1 1".
  std::string line(const std::string& name) const {
    std::string out = name + ": host syncs per step";
    for (uint64_t s : per_step_) out += " " + std::to_string(s);
    return out;
  }
  // A failure line unless every step from the second on made exactly one (the first sets up).
  std::string failure(const std::string& name) const {
    for (size_t step = 1; step < per_step_.size(); ++step) {
      if (per_step_[step] != 1) return "\n" + line(name) + " (want 1 a step from the second on)";
    }
    return {};
  }

 private:
  static uint64_t now() {
#ifdef DSX_CUDA_EMULATED
    return dsx::emu::host_syncs_of_this_thread();
#else
    return 0;
#endif
  }
  uint64_t before_ = 0;
  std::vector<uint64_t> per_step_;
};

}  // namespace dsx::test
