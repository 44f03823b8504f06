// Checksums and copies of large checkpoint buffers, spread over the machine's cores: one core
// reads memory at a fraction of the machine's bandwidth, and a load or commit has nothing else to
// do meanwhile. Buffers under a few MiB stay on the calling thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dsx::checkpoint {

// CRC32C of `size` bytes: pieces checksummed on their own threads, joined with crc32c_combine.
uint32_t crc32c_parallel(const void* data, size_t size);

// memcpy, the pieces on their own threads.
void copy_parallel(void* dst, const void* src, size_t size);

}  // namespace dsx::checkpoint
