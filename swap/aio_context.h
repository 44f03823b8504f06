// One kernel AIO context (libaio) and the block loop that moves one contiguous part of a request
// through it: cut into block_size blocks, up to queue_depth in flight, submitted one at a time
// (single_submit) or as a batch, and reaped as each completes (overlap_events) or a batch at a
// time. One worker thread owns one context.
#pragma once

#include <libaio.h>

#include <cstddef>
#include <string>
#include <vector>

#include "swap/aio_handle.h"
#include "swap/aio_options.h"

namespace dsx::swap {

class AioContext {
 public:
  explicit AioContext(const AioOptions& options);
  ~AioContext();
  AioContext(const AioContext&) = delete;
  AioContext& operator=(const AioContext&) = delete;

  // Moves `bytes` between `buffer` and `fd` at `offset`; throws Error(Io) naming `path`.
  void transfer(IoKind kind, int fd, char* buffer, size_t bytes, size_t offset,
                const std::string& path);

 private:
  // Submits the prepared blocks (all at once, or one call each with single_submit).
  void submit(std::vector<iocb*>& ready, IoKind kind, const std::string& path);
  // Waits for at least `min_events` completions; returns how many came, each checked.
  int reap(int min_events, int max_events, IoKind kind, const std::string& path);

  // After a failure: waits for the blocks still in flight, ignoring their results.
  void drain(int in_flight);

  AioOptions options_;
  io_context_t context_ = nullptr;
  std::vector<iocb> blocks_;
  std::vector<io_event> events_;
};

}  // namespace dsx::swap
