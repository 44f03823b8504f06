// Memory maps and atomic writes (see files.h).
#include "models/io/files.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "dsx/error.h"
#include "dsx/json_input.h"

namespace dsx::models {

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, const char* hint) {
  throw Error(ErrorKind::Io, what + " '" + path + "': " + std::strerror(errno) + hint);
}

std::string directory_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

std::string read_text_file(const std::string& path, const std::string& why) {
  if (!std::ifstream(path, std::ios::binary)) throw Error(ErrorKind::Io, "cannot read '" + path + "'; " + why);
  return read_bounded_file(path);  // capped: /dev/zero or a huge file is refused, not read whole
}

MappedFile::MappedFile(const std::string& path, bool populate) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open", path, "; check the path and its permissions");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail("cannot stat", path, "");
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw Error(ErrorKind::Io, "'" + path + "' is a directory; give the path of a file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | (populate ? MAP_POPULATE : 0), fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      fail("cannot map", path, "");
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

AtomicWriter::AtomicWriter(std::string path) : path_(std::move(path)) {
  temp_path_ = path_ + ".tmp." + std::to_string(::getpid());
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot create", temp_path_, "; check that the directory exists and is writable");
}

AtomicWriter::~AtomicWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_path_.c_str());
  }
}

void AtomicWriter::write(const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("cannot write", temp_path_, errno == ENOSPC ? "; the disk is full, free space and retry" : "");
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void AtomicWriter::commit() {
  if (::fsync(fd_) != 0) fail("cannot fsync", temp_path_, "");
  ::close(fd_);
  fd_ = -1;
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    ::unlink(temp_path_.c_str());
    fail("cannot rename into", path_, "");
  }
  int dir = ::open(directory_of(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace dsx::models
