// File checks shared by commit (before `latest` moves) and by loading.
#include "checkpoint/verify.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <vector>

#include "dsx/error.h"
#include "checkpoint/crc32c.h"
#include "checkpoint/durable_file.h"

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

}  // namespace

FileRecord measure_file(const std::string& path) {
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
  // Checksum the page cache in place (no copy into a buffer); fall back to read() where the file
  // system can not map files.
  const auto size = static_cast<size_t>(st.st_size);
  void* map = size ? ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
  if (map != MAP_FAILED) {
    ::madvise(map, size, MADV_SEQUENTIAL);
    record.crc32c = crc32c(map, size);
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

void verify_file(const std::string& path, const FileRecord& expected, VerifyLevel level) {
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
  FileRecord actual = measure_file(path);
  if (actual.size != expected.size) throw_size_mismatch(path, actual.size, expected.size);
  if (actual.crc32c != expected.crc32c) throw_corrupt(path, actual.crc32c, expected.crc32c);
}

}  // namespace dsx::checkpoint
