// The worker threads and tickets of AioHandle (see aio_handle.h): a request is opened once,
// split into intra_op_parallelism aligned parts, and each part queued to its worker, whose
// AioContext moves it. The last part to finish closes the file and wakes the waiter.
#include "swap/aio_handle.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "dsx/error.h"
#include "swap/aio_context.h"

namespace dsx::swap {

struct IoState {
  std::mutex mutex;
  std::condition_variable done;
  int parts_left = 0;
  int fd = -1;
  std::exception_ptr error;
};

struct AioHandle::Part {
  std::shared_ptr<IoState> state;
  IoKind kind;
  std::string path;
  char* buffer;
  size_t bytes;
  size_t offset;
};

struct AioHandle::Worker {
  explicit Worker(const AioOptions& options) : context(options) {}
  AioContext context;
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<Part> queue;
  bool stop = false;
  std::thread thread;
};

namespace {

int open_direct(const IoRequest& r) {
  const int flags = (r.kind == IoKind::Read ? O_RDONLY : O_WRONLY) | O_DIRECT | O_CLOEXEC;
  const int fd = ::open(r.path.c_str(), flags);
  if (fd < 0) {
    const int err = errno;
    throw Error(ErrorKind::Io,
                "swap file " + r.path + ": cannot open it for " +
                    (r.kind == IoKind::Read ? "reading" : "writing") + ": " + std::strerror(err) +
                    ". The swap directory under nvme_path was removed or unmounted during the "
                    "run; the last checkpoint was not touched: resume from it.");
  }
  return fd;
}

// A swap file is reserved at its full size when it is made, so every transfer lies inside it: a
// write past the end would extend the file (a slower, serialised path in the file system, and
// space nobody reserved), a read past it would come back short. Either means the file was cut
// short under us, or a caller's offsets are wrong.
void check_inside_file(int fd, const IoRequest& r) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return;  // the transfer itself reports a broken file
  const auto size = static_cast<size_t>(st.st_size);
  if (r.offset + r.bytes <= size) return;
  ::close(fd);
  throw Error(ErrorKind::Io,
              "swap file " + r.path + ": a " + (r.kind == IoKind::Read ? "read" : "write") +
                  " of " + std::to_string(r.bytes) + " bytes at offset " +
                  std::to_string(r.offset) + " reaches past the file's end (" +
                  std::to_string(size) +
                  " bytes); swap files keep the size they were made with, so it was truncated "
                  "or replaced during the run (does another job use this nvme_path?). The last "
                  "checkpoint was not touched: resume from it.");
}

void finish_part(IoState& state, std::exception_ptr error) {
  std::lock_guard lock(state.mutex);
  if (error && !state.error) state.error = error;
  if (--state.parts_left == 0) {
    ::close(state.fd);
    state.fd = -1;
    state.done.notify_all();
  }
}

}  // namespace

void IoTicket::wait(std::chrono::milliseconds timeout) {
  if (!state_) return;
  std::unique_lock lock(state_->mutex);
  if (!state_->done.wait_for(lock, timeout, [&] { return state_->parts_left == 0; })) {
    throw Error(ErrorKind::Timeout, "swap: a transfer did not finish within " +
                                        std::to_string(timeout.count()) +
                                        " ms; the drive behind nvme_path is hung or far too slow");
  }
  std::exception_ptr error = state_->error;
  lock.unlock();
  state_.reset();
  if (error) std::rethrow_exception(error);
}

AioHandle::AioHandle(const AioOptions& options) : options_(options) {
  if (options.block_size == 0 || options.block_size % kDirectAlignment != 0 ||
      options.queue_depth < 1 || options.intra_op_parallelism < 1) {
    throw Error(
        ErrorKind::Config,
        "aio: block_size must be a positive multiple of " + std::to_string(kDirectAlignment) +
            " bytes and queue_depth and intra_op_parallelism at least 1 (got " +
            std::to_string(options.block_size) + ", " + std::to_string(options.queue_depth) + ", " +
            std::to_string(options.intra_op_parallelism) + ")");
  }
  for (int i = 0; i < options.intra_op_parallelism; ++i) {
    workers_.push_back(std::make_unique<Worker>(options));
    Worker& w = *workers_.back();
    w.thread = std::thread([this, &w] { serve(w); });
  }
}

AioHandle::~AioHandle() {
  for (auto& w : workers_) {
    {
      std::lock_guard lock(w->mutex);
      w->stop = true;
    }
    w->wake.notify_one();
  }
  for (auto& w : workers_) w->thread.join();
}

void AioHandle::serve(Worker& worker) {
  for (;;) {
    Part part;
    {
      std::unique_lock lock(worker.mutex);
      worker.wake.wait(lock, [&] { return worker.stop || !worker.queue.empty(); });
      if (worker.queue.empty()) return;  // stopping, nothing left
      part = std::move(worker.queue.front());
      worker.queue.pop_front();
    }
    std::exception_ptr error;
    try {
      worker.context.transfer(part.kind, part.state->fd, part.buffer, part.bytes, part.offset,
                              part.path);
    } catch (...) {
      error = std::current_exception();
    }
    finish_part(*part.state, error);
  }
}

IoTicket AioHandle::submit(const IoRequest& r) {
  const auto address = reinterpret_cast<uintptr_t>(r.buffer);
  if (address % kDirectAlignment || r.bytes % kDirectAlignment || r.offset % kDirectAlignment) {
    throw Error(ErrorKind::Internal, "swap: a direct transfer of " + r.path +
                                         " is not aligned to " + std::to_string(kDirectAlignment) +
                                         " bytes");
  }
  auto state = std::make_shared<IoState>();
  if (r.bytes == 0) return {};
  state->fd = open_direct(r);
  check_inside_file(state->fd, r);
  // Equal aligned parts, one per worker; a short request uses fewer workers.
  const size_t n = workers_.size();
  const size_t part = align_up((r.bytes + n - 1) / n, kDirectAlignment);
  const size_t parts = (r.bytes + part - 1) / part;
  state->parts_left = static_cast<int>(parts);
  for (size_t i = 0; i < parts; ++i) {
    const size_t at = i * part;
    Worker& w = *workers_[i];
    {
      std::lock_guard lock(w.mutex);
      w.queue.push_back(Part{state, r.kind, r.path, static_cast<char*>(r.buffer) + at,
                             std::min(part, r.bytes - at), r.offset + at});
    }
    w.wake.notify_one();
  }
  return IoTicket(std::move(state));
}

std::chrono::milliseconds AioHandle::patience(size_t bytes) const {
  // Each block has its own timeout inside the workers; this one only guards the wait itself.
  return options_.block_timeout * static_cast<long>(bytes / options_.block_size + 2);
}

void AioHandle::read(const std::string& path, void* buffer, size_t bytes, size_t offset) {
  submit({IoKind::Read, path, buffer, bytes, offset}).wait(patience(bytes));
}

void AioHandle::write(const std::string& path, const void* buffer, size_t bytes, size_t offset) {
  submit({IoKind::Write, path, const_cast<void*>(buffer), bytes, offset}).wait(patience(bytes));
}

}  // namespace dsx::swap
