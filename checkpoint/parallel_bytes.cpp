// Splitting a buffer into one piece per thread (see parallel_bytes.h).
#include "checkpoint/parallel_bytes.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <thread>
#include <vector>

#include "checkpoint/crc32c.h"

namespace dsx::checkpoint {
namespace {

constexpr size_t kMinPiece = 4u << 20;  // below this a thread's start costs more than it saves

size_t piece_count(size_t size) { return std::clamp<size_t>(size / kMinPiece, 1, io_threads()); }

// Runs work(i) for i in [0, pieces): piece 0 on this thread, the others on their own. A thread
// that cannot be started leaves its piece to this thread.
template <class Work>
void for_each_piece(size_t pieces, const Work& work) {
  std::vector<std::thread> threads;
  std::vector<size_t> left;
  for (size_t i = 1; i < pieces; ++i) {
    try {
      threads.emplace_back(work, i);
    } catch (const std::system_error&) {
      left.push_back(i);
    }
  }
  work(0);
  for (size_t i : left) work(i);
  for (auto& t : threads) t.join();
}

// Piece i of `pieces` equal pieces of `size` bytes, cut at 64-byte boundaries: [begin, end).
size_t piece_begin(size_t size, size_t pieces, size_t i) {
  return i == pieces ? size : (size / pieces * i) & ~size_t{63};
}

constexpr size_t kCacheBlock = 256u << 10;  // checksummed, then copied from L2

// Bytes [begin, end) of data, a cache block at a time: checksummed, then each range's part of the
// block handed to visit(range, offset in the range, bytes, size) while still in the cache.
template <class Visit>
uint32_t crc32c_block_by_block(const uint8_t* data, size_t begin, size_t end,
                               const std::vector<CopyRange>& ranges, const Visit& visit) {
  uint32_t crc = 0;
  for (size_t block = begin; block < end; block += kCacheBlock) {
    const size_t block_end = std::min(end, block + kCacheBlock);
    crc = crc32c_extend(crc, data + block, block_end - block);
    for (size_t i = 0; i < ranges.size(); ++i) {
      const CopyRange& r = ranges[i];
      const size_t from = std::max(block, r.offset), to = std::min(block_end, r.offset + r.size);
      if (from < to) visit(i, from - r.offset, data + from, to - from);
    }
  }
  return crc;
}

// One thread's share of crc32c_and_copy: bytes [begin, end) of data.
uint32_t crc32c_and_copy_piece(const uint8_t* data, size_t begin, size_t end,
                               const std::vector<CopyRange>& ranges) {
  return crc32c_block_by_block(
      data, begin, end, ranges, [&](size_t i, size_t offset, const uint8_t* bytes, size_t n) {
        std::memcpy(static_cast<uint8_t*>(ranges[i].dst) + offset, bytes, n);
      });
}

}  // namespace

unsigned io_threads() {
  // One core checksums at about the memory's speed (up to 33 GB/s on the 2-core Zen 5 VM of
  // docs/benchmarks.md); there a second thread gained nothing (bench_checkpoint's CRC rows) or
  // lost, when other processes held the cores and the join waited for the last piece. More
  // threads pay only where cores are many: a quarter of them, at most 8, unless
  // DSX_CHECKPOINT_THREADS says otherwise.
  if (const char* forced = std::getenv("DSX_CHECKPOINT_THREADS")) {
    const long n = std::strtol(forced, nullptr, 10);
    if (n >= 1 && n <= 64) return static_cast<unsigned>(n);
  }
  return std::clamp(std::thread::hardware_concurrency() / 4, 1u, 8u);
}

uint32_t crc32c_and_copy(const void* data, size_t size, const std::vector<CopyRange>& ranges) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  const size_t pieces = piece_count(size);
  std::vector<uint32_t> crcs(pieces);
  for_each_piece(pieces, [&](size_t i) {
    crcs[i] = crc32c_and_copy_piece(bytes, piece_begin(size, pieces, i),
                                    piece_begin(size, pieces, i + 1), ranges);
  });
  uint32_t crc = crcs[0];
  for (size_t i = 1; i < pieces; ++i)
    crc = crc32c_combine(crc, crcs[i], piece_begin(size, pieces, i + 1) - piece_begin(size, pieces, i));
  return crc;
}

uint32_t crc32c_and_visit(const void* data, size_t size, const std::vector<CopyRange>& ranges,
                          const RangeVisitor& visit) {
  return crc32c_block_by_block(static_cast<const uint8_t*>(data), 0, size, ranges, visit);
}

uint32_t crc32c_parallel(const void* data, size_t size) {
  const size_t pieces = piece_count(size);
  if (pieces == 1) return crc32c(data, size);
  const auto* bytes = static_cast<const uint8_t*>(data);
  std::vector<uint32_t> crcs(pieces);
  for_each_piece(pieces, [&](size_t i) {
    const size_t begin = piece_begin(size, pieces, i), end = piece_begin(size, pieces, i + 1);
    crcs[i] = crc32c(bytes + begin, end - begin);
  });
  uint32_t crc = crcs[0];
  for (size_t i = 1; i < pieces; ++i)
    crc = crc32c_combine(crc, crcs[i], piece_begin(size, pieces, i + 1) - piece_begin(size, pieces, i));
  return crc;
}

void copy_parallel(void* dst, const void* src, size_t size) {
  const size_t pieces = piece_count(size);
  if (pieces == 1) {
    if (size > 0) std::memcpy(dst, src, size);
    return;
  }
  for_each_piece(pieces, [&](size_t i) {
    const size_t begin = piece_begin(size, pieces, i), end = piece_begin(size, pieces, i + 1);
    std::memcpy(static_cast<uint8_t*>(dst) + begin, static_cast<const uint8_t*>(src) + begin,
                end - begin);
  });
}

}  // namespace dsx::checkpoint
