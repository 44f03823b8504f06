// Direct (O_DIRECT) reads and writes of whole files regions through Linux native AIO (libaio),
// as DeepSpeed's async_io op does: a request is split over `intra_op_parallelism` workers, each
// with its own AIO context, and each worker moves its part in `block_size` blocks with up to
// `queue_depth` in flight (aio_options.h gives the keys' meaning).
//
// Buffers, offsets and lengths must be multiples of kDirectAlignment (AlignedBuffer's are). The
// handle never creates files: a swap file is made (and its space reserved) by SwapFile, so a
// file or directory that vanished during the run fails the next transfer with an error naming
// it, instead of a fresh sparse file that would read back zeros.
// Nor does it extend one: a transfer that reaches past the file's end is refused, naming it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "swap/aio_options.h"

namespace dsx::swap {

enum class IoKind { Read, Write };

struct IoRequest {
  IoKind kind = IoKind::Read;
  std::string path;
  void* buffer = nullptr;  // Read: filled; Write: the source
  size_t bytes = 0;
  size_t offset = 0;  // in the file
};

struct IoState;  // shared by a ticket and the workers serving its parts

// A request in flight. wait() returns when every part finished, and throws the first part's
// error (Error(Io), naming the file), or Error(Timeout) past `timeout`.
class IoTicket {
 public:
  IoTicket() = default;
  explicit IoTicket(std::shared_ptr<IoState> state) : state_(std::move(state)) {}
  bool pending() const { return state_ != nullptr; }
  void wait(std::chrono::milliseconds timeout);

 private:
  std::shared_ptr<IoState> state_;
};

class AioHandle {
 public:
  explicit AioHandle(const AioOptions& options);
  ~AioHandle();
  AioHandle(const AioHandle&) = delete;
  AioHandle& operator=(const AioHandle&) = delete;

  const AioOptions& options() const { return options_; }
  // Starts the transfer and returns at once; the buffer must stay alive until wait() returned.
  IoTicket submit(const IoRequest& request);
  // submit() and wait().
  void read(const std::string& path, void* buffer, size_t bytes, size_t offset);
  void write(const std::string& path, const void* buffer, size_t bytes, size_t offset);
  // How long a wait for `bytes` may take: the blocks' own timeouts, plus slack.
  std::chrono::milliseconds patience(size_t bytes) const;

 private:
  struct Part;
  struct Worker;
  void serve(Worker& worker);

  AioOptions options_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace dsx::swap
