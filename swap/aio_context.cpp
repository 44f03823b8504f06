// The libaio block loop of one worker (see aio_context.h), after DeepSpeed's
// do_aio_operation_overlap / _sequential (csrc/aio/common/deepspeed_aio_common.cpp).
#include "swap/aio_context.h"

#include <cerrno>
#include <cstring>
#include <ctime>

#include "dsx/error.h"

namespace dsx::swap {
namespace {

std::string transfer_error(IoKind kind, const std::string& path, int err) {
  std::string what = std::string("swap file ") + path + ": " +
                     (kind == IoKind::Read ? "read" : "write") + " failed: " + std::strerror(err) +
                     ".";
  if (err == ENOSPC || err == EFBIG || err == EDQUOT) {
    what +=
        " The disk holding the swap files is full: free space there or point nvme_path at a larger "
        "drive.";
  } else {
    what += " Check the drive behind nvme_path (was it unmounted or removed during the run?).";
  }
  return what + " The last checkpoint was not touched: resume from it once the drive is back.";
}

}  // namespace

AioContext::AioContext(const AioOptions& options)
    : options_(options),
      blocks_(static_cast<size_t>(options.queue_depth)),
      events_(static_cast<size_t>(options.queue_depth)) {
  const int rc = io_queue_init(options.queue_depth, &context_);
  if (rc < 0) {
    throw Error(ErrorKind::Io, std::string("swap: io_setup(") +
                                   std::to_string(options.queue_depth) +
                                   ") failed: " + std::strerror(-rc) +
                                   ". Lower aio.queue_depth or raise /proc/sys/fs/aio-max-nr.");
  }
}

AioContext::~AioContext() { io_queue_release(context_); }

void AioContext::submit(std::vector<iocb*>& ready, IoKind kind, const std::string& path) {
  size_t done = 0;
  while (done < ready.size()) {
    const long n = options_.single_submit ? 1 : static_cast<long>(ready.size() - done);
    const int rc = io_submit(context_, n, ready.data() + done);
    if (rc == -EAGAIN || rc == -EINTR) continue;
    if (rc < 0) throw Error(ErrorKind::Io, transfer_error(kind, path, -rc));
    done += static_cast<size_t>(rc);
  }
  ready.clear();
}

int AioContext::reap(int min_events, int max_events, IoKind kind, const std::string& path) {
  const auto limit = options_.block_timeout;
  timespec timeout{static_cast<time_t>(limit.count() / 1000),
                   static_cast<long>(limit.count() % 1000) * 1'000'000};
  int got = 0;
  while (got < min_events) {
    const int rc =
        io_getevents(context_, min_events - got, max_events - got, events_.data() + got, &timeout);
    if (rc == -EINTR) continue;
    if (rc < 0) throw Error(ErrorKind::Io, transfer_error(kind, path, -rc));
    if (rc == 0) {
      throw Error(ErrorKind::Timeout,
                  "swap file " + path + ": a " + std::to_string(options_.block_size) +
                      "-byte block took longer than " + std::to_string(limit.count()) +
                      " ms. The drive behind nvme_path is hung or gone.");
    }
    got += rc;
  }
  for (int i = 0; i < got; ++i) {
    const long res = static_cast<long>(events_[static_cast<size_t>(i)].res);
    const iocb* block = events_[static_cast<size_t>(i)].obj;
    if (res < 0) throw Error(ErrorKind::Io, transfer_error(kind, path, static_cast<int>(-res)));
    if (static_cast<size_t>(res) !=
        block->u.c.nbytes) {  // past the end of the file, or a full disk
      throw Error(ErrorKind::Io, transfer_error(kind, path, kind == IoKind::Read ? EIO : ENOSPC));
    }
  }
  return got;
}

void AioContext::drain(int in_flight) {
  timespec timeout{static_cast<time_t>(options_.block_timeout.count() / 1000), 0};
  while (in_flight > 0) {
    const int rc = io_getevents(context_, 1, in_flight, events_.data(), &timeout);
    if (rc == -EINTR) continue;
    if (rc <= 0) return;  // nothing more comes back: io_destroy cancels the rest
    in_flight -= rc;
  }
}

void AioContext::transfer(IoKind kind, int fd, char* buffer, size_t bytes, size_t offset,
                          const std::string& path) {
  const size_t block = options_.block_size;
  const size_t count = (bytes + block - 1) / block;
  std::vector<iocb*> free_blocks;
  for (iocb& b : blocks_) free_blocks.push_back(&b);
  std::vector<iocb*> ready;
  size_t next = 0;
  size_t finished = 0;
  int in_flight = 0;
  while (finished < count) {
    while (!free_blocks.empty() && next < count) {
      iocb* b = free_blocks.back();
      free_blocks.pop_back();
      const size_t at = next * block;
      const size_t n = std::min(block, bytes - at);
      if (kind == IoKind::Read) {
        io_prep_pread(b, fd, buffer + at, n, static_cast<long long>(offset + at));
      } else {
        io_prep_pwrite(b, fd, buffer + at, n, static_cast<long long>(offset + at));
      }
      ready.push_back(b);
      ++next;
      ++in_flight;
    }
    int got = 0;
    try {
      submit(ready, kind, path);
      // overlap_events: refill as soon as one block is back; else drain the whole batch first.
      got = reap(options_.overlap_events ? 1 : in_flight, in_flight, kind, path);
    } catch (...) {
      drain(in_flight -
            static_cast<int>(ready.size()));  // the kernel must let go of the buffer first
      throw;
    }
    for (int i = 0; i < got; ++i) free_blocks.push_back(events_[static_cast<size_t>(i)].obj);
    in_flight -= got;
    finished += static_cast<size_t>(got);
  }
}

}  // namespace dsx::swap
