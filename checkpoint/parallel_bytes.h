// Checksums and copies of large checkpoint buffers, spread over the machine's cores: one core
// reads memory at a fraction of the machine's bandwidth, and a load or commit has nothing else to
// do meanwhile. Buffers under a few MiB stay on the calling thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dsx::checkpoint {

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

}  // namespace dsx::checkpoint
