// Page-aligned, optionally locked host buffers for O_DIRECT transfers (see aligned_buffer.h).
#include "swap/aligned_buffer.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "dsx/error.h"
#include "swap/aio_options.h"

namespace dsx::swap {

AlignedBuffer::AlignedBuffer(size_t bytes, bool pin_memory)
    : bytes_(align_up(bytes, kDirectAlignment)) {
  if (bytes_ == 0) return;
  // Large buffers on 2 MiB boundaries as transparent huge pages: the kernel pins a buffer's pages
  // for every direct transfer, and a 2 MiB page is one pin instead of 512.
  const size_t huge = size_t{2} << 20;
  const size_t alignment = bytes_ >= huge ? huge : kDirectAlignment;
  if (posix_memalign(&data_, alignment, bytes_) != 0) {
    data_ = nullptr;
    throw Error(ErrorKind::OutOfMemory, "swap: could not allocate " + std::to_string(bytes_) +
                                            " bytes of aligned host memory for I/O buffers");
  }
  if (alignment == huge) madvise(data_, bytes_, MADV_HUGEPAGE);  // advice only: may be refused
  std::memset(data_, 0, bytes_);  // touched now, so the first transfer does not fault pages in
  locked_ = pin_memory && mlock(data_, bytes_) == 0;
}

AlignedBuffer::~AlignedBuffer() { release(); }

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      locked_(std::exchange(other.locked_, false)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    locked_ = std::exchange(other.locked_, false);
  }
  return *this;
}

void AlignedBuffer::release() {
  if (!data_) return;
  if (locked_) munlock(data_, bytes_);
  std::free(data_);
  data_ = nullptr;
}

}  // namespace dsx::swap
