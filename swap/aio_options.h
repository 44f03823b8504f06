// The ds_config's `aio` block as the swap layer uses it, with DeepSpeed's meaning
// (deepspeed/runtime/swap_tensor/constants.py; csrc/aio):
//   block_size            one request is cut into reads/writes of this many bytes;
//   queue_depth           at most this many of them in flight per worker;
//   intra_op_parallelism  one request is split over this many workers, each with its own
//                         kernel AIO context (thread_count before DeepSpeed v0.16.4);
//   single_submit         submit one block per io_submit call instead of a batch;
//   overlap_events        keep queue_depth blocks in flight, refilling as each completes;
//                         false: submit a batch, wait for all of it, then the next batch.
#pragma once

#include <chrono>
#include <cstddef>

namespace dsx::swap {

struct AioOptions {
  size_t block_size = 1'048'576;
  int queue_depth = 8;
  int intra_op_parallelism = 1;
  bool single_submit = false;
  bool overlap_events = true;
  // How long one block may take before the request fails (a hung or vanished device).
  std::chrono::milliseconds block_timeout = std::chrono::minutes(2);
};

// O_DIRECT needs the buffer, the offset and the length aligned to the device's logical block
// (512 B on most, 4 KiB on some): 4 KiB covers both, and is the page size buffers come in.
inline constexpr size_t kDirectAlignment = 4096;

inline size_t align_up(size_t n, size_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

}  // namespace dsx::swap
