// File checks shared by commit (before `latest` moves) and by loading.
#include "checkpoint/verify.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <utility>
#include <vector>

#include "dsx/error.h"
#include "checkpoint/crc32c.h"
#include "checkpoint/durable_file.h"
#include "checkpoint/parallel_bytes.h"

namespace dsx::checkpoint {
namespace {

std::string hex(uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof text, "%08" PRIx32, v);
  return text;
}

[[noreturn]] void throw_size_mismatch(const std::string& path, uint64_t size, uint64_t expected) {
  throw Error(ErrorKind::Format,
              "checkpoint file " + path + (size < expected ? " is truncated" : " is too long") +
                  ": " + std::to_string(size) + " bytes, the manifest says " +
                  std::to_string(expected) +
                  "; the file was damaged after the save completed. Load an earlier tag, or "
                  "restore the file from a copy");
}

[[noreturn]] void throw_corrupt(const std::string& path, uint32_t crc, uint32_t expected) {
  throw Error(ErrorKind::Format, "checkpoint file " + path + " is corrupt: its CRC32C is " +
                                     hex(crc) + ", the manifest says " + hex(expected) +
                                     "; load an earlier tag, or restore the file from a copy");
}

// on_all_cores: checksum a mapped file's pieces on io_threads() threads (one file at a time),
// else on this thread (verify_files runs one file per thread).
FileRecord measure(const std::string& path, bool on_all_cores) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_io_error("could not open", path, errno);
  FileRecord record;
  record.name = path;
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw_io_error("could not examine", path, err);
  }
  // Checksum the page cache in place (no copy into a buffer), its page tables filled in one call
  // and its pieces on several threads; fall back to read() where the file system can not map.
  const auto size = static_cast<size_t>(st.st_size);
  void* map = size ? ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0) : MAP_FAILED;
  if (map != MAP_FAILED) {
    record.crc32c = on_all_cores ? crc32c_parallel(map, size) : crc32c(map, size);
    record.size = size;
    ::munmap(map, size);
    ::close(fd);
    return record;
  }
  std::vector<char> buffer(4 << 20);
  for (;;) {
    ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      throw_io_error("could not read", path, err);
    }
    if (n == 0) break;
    record.crc32c = crc32c_extend(record.crc32c, buffer.data(), static_cast<size_t>(n));
    record.size += static_cast<uint64_t>(n);
  }
  ::close(fd);
  return record;
}

void verify_one(const std::string& path, const FileRecord& expected, VerifyLevel level,
                bool on_all_cores) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT)
      throw Error(ErrorKind::Format, "checkpoint file " + path +
                                         " is missing (the manifest lists it): the checkpoint is "
                                         "incomplete; load an earlier tag");
    throw_io_error("could not examine", path, errno);
  }
  auto size = static_cast<uint64_t>(st.st_size);
  if (size != expected.size) throw_size_mismatch(path, size, expected.size);
  if (level == VerifyLevel::Size) return;
  FileRecord actual = measure(path, on_all_cores);
  if (actual.size != expected.size) throw_size_mismatch(path, actual.size, expected.size);
  if (actual.crc32c != expected.crc32c) throw_corrupt(path, actual.crc32c, expected.crc32c);
}

}  // namespace

FileRecord measure_file(const std::string& path) { return measure(path, true); }

void check_crc32c(const std::string& path, uint32_t crc, const FileRecord& expected) {
  if (crc != expected.crc32c) throw_corrupt(path, crc, expected.crc32c);
}

void verify_bytes(const std::string& path, const void* data, uint64_t size,
                  const FileRecord& expected) {
  if (size != expected.size) throw_size_mismatch(path, size, expected.size);
  const uint32_t crc = crc32c_parallel(data, size);
  if (crc != expected.crc32c) throw_corrupt(path, crc, expected.crc32c);
}

void verify_file(const std::string& path, const FileRecord& expected, VerifyLevel level) {
  verify_one(path, expected, level, true);
}

void verify_files(const std::vector<std::pair<std::string, FileRecord>>& files, VerifyLevel level) {
  const size_t threads = std::min<size_t>(files.size(), io_threads());
  if (level == VerifyLevel::Size || threads <= 1) {
    for (const auto& [path, record] : files) verify_file(path, record, level);
    return;
  }
  // One file per thread; every file is checked, and the first failing one in the list is reported.
  std::vector<std::exception_ptr> errors(files.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < files.size();) {
      try {
        verify_one(files[i].first, files[i].second, level, false);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  {
    std::vector<std::jthread> pool;
    for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
  }
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace dsx::checkpoint
