#include "tests/emulated_gpu/shared_memory.h"

#include <string>

#include "tests/emulated_gpu/block_runner.h"

namespace dsx::emu {
namespace {

constexpr size_t kStaticSharedLimit = 48 * 1024;  // CUDA's limit on static __shared__ per block

std::string thread_name(const ThreadState& t) {
  return "(" + std::to_string(t.thread_idx.x) + "," + std::to_string(t.thread_idx.y) + "," +
         std::to_string(t.thread_idx.z) + ")";
}

void report(BlockState& b, const std::string& what) {
  if (!b.failure.empty()) return;
  b.failure = "kernel " + std::string(b.kernel) + ", block (" + std::to_string(b.block_idx.x) +
              "," + std::to_string(b.block_idx.y) + "," + std::to_string(b.block_idx.z) + "): " + what;
}

// Whether thread u's access (made at warp epoch `u_warp_epoch`) is unordered with thread t now:
// the same barrier epoch, another thread, and no warp exchange of theirs in between.
bool unordered(const BlockState& b, unsigned t, unsigned u, uint32_t u_warp_epoch) {
  if (t == u) return false;
  const unsigned w = t / 32;
  return !(u / 32 == w && b.warp_epoch[w] != u_warp_epoch);
}

void race(BlockState& b, const char* name, size_t offset, const char* first, unsigned u,
          const char* second, unsigned t) {
  report(b, "race on shared memory '" + std::string(name) + "' (byte " + std::to_string(offset) +
                " of the block's shared memory): thread " + thread_name(b.threads[t]) + " " +
                second + " it after thread " + thread_name(b.threads[u]) + " " + first +
                " it, with no __syncthreads between");
}

}  // namespace

void shared_access(const void* address, size_t bytes, bool write, const char* name) {
  ThreadState& self = this_thread();
  BlockState& b = *self.block;
  const auto* at = static_cast<const std::byte*>(address);
  if (at < b.shared.data() || at + bytes > b.shared.data() + b.shared.size()) return;  // scratch
  const size_t offset = size_t(at - b.shared.data());
  const unsigned t = self.linear;
  const uint32_t epoch = b.barrier_epoch, warp_epoch = b.warp_epoch[t / 32];
  for (size_t word = offset / 4; word <= (offset + bytes - 1) / 4; ++word) {
    SharedWordAccess& a = b.shared_words[word];
    const bool written = a.write_epoch == epoch;
    if (written && unordered(b, t, a.writer, a.writer_warp_epoch))
      race(b, name, offset, "wrote", a.writer, write ? "writes" : "reads", t);
    if (write) {
      if (a.read_epoch == epoch &&
          (a.many_readers || unordered(b, t, a.reader, a.reader_warp_epoch)))
        race(b, name, offset, "read", a.reader, "writes", t);
      a.write_epoch = epoch;
      a.writer = uint16_t(t);
      a.writer_warp_epoch = warp_epoch;
    } else if (a.read_epoch != epoch) {
      a.read_epoch = epoch;
      a.reader = uint16_t(t);
      a.reader_warp_epoch = warp_epoch;
      a.many_readers = false;
    } else if (a.reader != t) {
      a.many_readers = true;
    }
  }
}

void* block_shared(const void* tag, size_t bytes, const char* name) {
  BlockState& b = *this_thread().block;
  for (const auto& [known, offset] : b.static_offsets)
    if (known == tag) return b.shared.data() + offset;
  const size_t offset = b.dynamic_shared + b.static_shared_used;
  b.static_shared_used += (bytes + 15) / 16 * 16;
  if (b.static_shared_used > kStaticSharedLimit) {
    report(b, "static shared memory '" + std::string(name) + "' takes the block past CUDA's 48 KiB");
    b.static_shared_used -= (bytes + 15) / 16 * 16;
    return shared_out_of_bounds(name, 0, 0, bytes);
  }
  b.static_offsets.emplace_back(tag, offset);
  reset_shared(b, offset, bytes);
  return b.shared.data() + offset;
}

void* dynamic_shared(size_t* bytes) {
  BlockState& b = *this_thread().block;
  *bytes = b.dynamic_shared;
  return b.shared.data();
}

void* shared_out_of_bounds(const char* name, long long index, size_t count, size_t element) {
  ThreadState& self = this_thread();
  report(*self.block, "thread " + thread_name(self) + " indexes shared memory '" + name + "' at " +
                          std::to_string(index) + ", outside its " + std::to_string(count) +
                          " elements");
  thread_local std::vector<std::byte> scratch;
  scratch.assign(element < 16 ? 16 : element, std::byte{0});
  return scratch.data();
}

}  // namespace dsx::emu
