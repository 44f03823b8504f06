// ZeRO-Infinity's optimizer swap (offload_optimizer.device "nvme"): this rank's optimizer state
// (Adam's moments, Lion's momentum, ...) lives in swap files under nvme_path, one file per state
// tensor, and comes into host memory one sub-group (sub_group_size elements) at a time for the
// step, as DeepSpeed's (Pipelined)OptimizerSwapper brings its sub-groups in (ref §3.3).
//
//   buffer_count    host buffers, one per state tensor of a sub-group: buffer_count / tensors
//                   sub-groups fit in memory at once (at least 1, at most 3 are used);
//   pipeline_read   the next sub-group's read runs while this one steps (needs 2 to fit);
//   pipeline_write  this sub-group's write runs while the next one steps (needs 2 to fit).
//
// With swap_master, the fp32 master partition is one more swapped tensor, as DeepSpeed's swapper
// holds the fp32 parameters with the optimizer state; the model reads a separate working copy.
// The files are per-run scratch (swap/swap_directory.h); checkpoints copy the state out.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "swap/aio_handle.h"
#include "swap/aligned_buffer.h"
#include "swap/swap_directory.h"
#include "zero/memory.h"

namespace dsx::zero {

struct OptimizerSwapOptions {
  std::string nvme_path;
  size_t sub_group_size = 1'000'000'000;  // elements
  size_t buffer_count = 4;
  bool pipeline_read = false;
  bool pipeline_write = false;
  bool pin_memory = true;
  bool swap_master = false;  // the fp32 master partition is swapped too (PartitionOptimizer)
  swap::AioOptions aio;
};

class OptimizerSwapper {
 public:
  // Swap files for `state_names` (numel fp32 elements each, zero to begin with) in
  // <nvme_path>/dsx_swap/optimizer/rank<rank>; the host buffers are charged to `ledger`.
  OptimizerSwapper(const OptimizerSwapOptions& options, std::vector<std::string> state_names,
                   size_t numel, int rank, MemoryLedger& ledger);
  ~OptimizerSwapper();

  // A sub-group in memory: elements [begin, begin + count) of every state tensor.
  struct Group {
    size_t begin = 0;
    size_t count = 0;
    std::vector<float*> state;  // state[t][i] is element begin + i of tensor t
  };
  // Calls `step` on every sub-group in order with its state read in, and writes each back after
  // it; `step` has finished with the memory when it returns. On return every write has landed.
  void for_each_group(const std::function<void(const Group&)>& step);
  size_t groups() const { return groups_; }
  size_t slots() const { return slots_.size(); }
  // Whole tensors, for checkpoints (host memory, numel elements).
  void read_state(size_t tensor, float* out);
  void write_state(size_t tensor, const float* values);

 private:
  struct Slot;
  Group group_in(size_t g, Slot& slot);
  void start_read(size_t g);
  void start_write(size_t g);
  void wait_writes(Slot& slot);
  void wait_all();  // every transfer in flight, errors dropped: after a failure
  size_t offset_of(size_t g) const { return g * group_bytes_; }
  size_t bytes_of(size_t g) const;

  OptimizerSwapOptions options_;
  std::vector<std::string> names_;
  size_t numel_;
  size_t group_numel_;
  size_t group_bytes_;
  size_t groups_;
  MemoryLedger& ledger_;
  swap::SwapDirectory directory_;
  std::vector<std::string> files_;
  swap::AioHandle reader_;
  swap::AioHandle writer_;
  std::vector<std::unique_ptr<Slot>> slots_;
};

}  // namespace dsx::zero
