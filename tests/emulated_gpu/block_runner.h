// Runs a kernel's blocks with their real shape: each GPU thread of a block is a fiber on the
// worker thread that runs the kernel, and the fibers switch only where a GPU thread would wait
// for others (__syncthreads, __syncwarp, shuffles, votes). So barriers, warp exchanges and shared
// memory mean what they mean on a GPU, and a block whose threads can never all meet is reported
// instead of hanging. Shared memory is one arena per block; every access to it is checked for
// races between barriers (shared_memory.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dsx::emu {

struct BlockState;

// Where a GPU thread is stopped, as the scheduler sees it.
enum class ThreadWait : uint8_t { Running, Barrier, Warp, Exited };

// A warp-wide exchange (shuffle, vote, __syncwarp): every lane deposits, then each reads.
enum class WarpOp : uint8_t { Shuffle, Ballot, Sync };

struct ThreadState {
  uint3 thread_idx{};
  unsigned linear = 0;  // x + y*X + z*X*Y, what the warp and lane numbers come from
  BlockState* block = nullptr;
  ThreadWait wait = ThreadWait::Running;
  // The pending warp exchange.
  WarpOp warp_op = WarpOp::Sync;
  unsigned warp_mask = 0;
  unsigned source_lane = 0;  // shuffles: the lane whose value this lane receives
  uint64_t deposit = 0;      // shuffles: this lane's value; votes: its predicate
  uint64_t result = 0;
  const char* site = "";  // the intrinsic this thread waits in, for reports
};

// The race check's record of one 4-byte word of shared memory since the last barrier.
struct SharedWordAccess {
  uint32_t write_epoch = 0, read_epoch = 0;    // barrier epochs of the last write and reads
  uint32_t writer_warp_epoch = 0, reader_warp_epoch = 0;
  uint16_t writer = 0, reader = 0;             // linear thread ids
  bool many_readers = false;
};

struct BlockState {
  uint3 block_idx{};
  dim3 block_dim{}, grid_dim{};
  const char* kernel = "";
  std::vector<ThreadState> threads;
  std::vector<std::byte> shared;  // the block's shared memory: static declarations, then dynamic
  size_t dynamic_shared = 0;
  size_t static_shared_used = 0;
  std::vector<std::pair<const void*, size_t>> static_offsets;  // declaration tag -> offset
  uint32_t barrier_epoch = 1;      // one more at every __syncthreads
  std::vector<uint32_t> warp_epoch;  // one more at every completed exchange of a warp
  std::vector<SharedWordAccess> shared_words;  // parallel to `shared`, one per 4 bytes
  std::string failure;  // the first fault found in the block (race, deadlock, bad exchange)
};

// The GPU thread running on this OS thread (only valid inside a kernel).
ThreadState& this_thread();

// Runs `body` for every thread of every block of the grid, blocks one after another. Returns
// the first fault found (a race, a barrier some threads can never reach, a shuffle from an exited
// lane), or an empty string.
std::string run_grid(const char* kernel, dim3 grid, dim3 block, size_t dynamic_shared,
                     const std::function<void()>& body);

// Fills [offset, offset + bytes) of the block's shared memory with garbage and forgets its
// accesses (a fresh block, or a static array declared).
void reset_shared(BlockState& b, size_t offset, size_t bytes);

// Block-wide barrier and warp exchanges, called by the intrinsics of device_functions.h.
void sync_threads();
uint64_t warp_exchange(WarpOp op, unsigned mask, uint64_t deposit, unsigned source_lane,
                       const char* site);

// Whether blocks' threads run in a seeded random order between synchronisation points
// (DSX_EMULATED_SCHEDULE=random[:SEED]) instead of thread order.
bool random_schedule();

}  // namespace dsx::emu
