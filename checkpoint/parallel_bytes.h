// Checksums and copies of large checkpoint buffers, spread over several cores where the machine
// has many (one core reads memory at a fraction of a large machine's bandwidth). Buffers under a
// few MiB, and every buffer on a machine of few cores, stay on the calling thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace dsx::checkpoint {

// The threads a checksum or copy is spread over: a quarter of the cores, 1 to 8; the environment
// variable DSX_CHECKPOINT_THREADS (1-64) sets it.
unsigned io_threads();

// CRC32C of `size` bytes: pieces checksummed on their own threads, joined with crc32c_combine.
uint32_t crc32c_parallel(const void* data, size_t size);

// memcpy, the pieces on their own threads.
void copy_parallel(void* dst, const void* src, size_t size);

// Bytes [offset, offset + size) of a buffer go to dst.
struct CopyRange {
  size_t offset = 0, size = 0;
  void* dst = nullptr;
};

// CRC32C of `size` bytes at `data` and, in the same pass, the copies of `ranges` (disjoint):
// each 256 KiB block is checksummed and then copied while it is still in the cache, so memory
// is read once. Pieces of the buffer run on their own threads, as crc32c_parallel's.
uint32_t crc32c_and_copy(const void* data, size_t size, const std::vector<CopyRange>& ranges);

// What crc32c_and_visit hands on: bytes [offset, offset + size) of ranges[range], at `bytes`.
using RangeVisitor =
    std::function<void(size_t range, size_t offset, const uint8_t* bytes, size_t size)>;

// CRC32C of `size` bytes at `data` and, in the same pass, each part of `ranges` (disjoint; their
// dst unused) handed to `visit` right after the 256 KiB block holding it was checksummed, while it
// is still in the cache. On this thread, in the buffer's order: a consumer that uses bytes where
// they lie (a sum, a conversion) reads memory once. It sees the bytes before the whole CRC is
// known.
uint32_t crc32c_and_visit(const void* data, size_t size, const std::vector<CopyRange>& ranges,
                          const RangeVisitor& visit);

}  // namespace dsx::checkpoint
