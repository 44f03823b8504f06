// Temp-file, fsync, rename, fsync-directory writes, with errors that say what to do.
#include "checkpoint/durable_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <thread>

#include "dsx/error.h"
#include "checkpoint/crc32c.h"

namespace dsx::checkpoint {
namespace {

const char* advice_for(int error_number) {
  switch (error_number) {
    case ENOSPC:
      return "the disk is full: free space there or save to another directory";
    case EDQUOT:
      return "the disk quota is used up: free space or save to another directory";
    case EFBIG:
      return "the file exceeds the process's file-size limit (ulimit -f) or the file "
             "system's largest file: raise the limit or save elsewhere";
    case EACCES:
    case EPERM:
      return "permission denied: make the directory writable for this user or save "
             "to another directory";
    case EROFS:
      return "the file system is read-only: save to a writable directory";
    case ENOENT:
      return "the directory does not exist (was it removed during the save?)";
    case ENOTDIR:
      return "a part of the path is a file, not a directory";
    case EIO:
      return "the device reported an I/O error: check the disk";
    default:
      return "check the path and the file system";
  }
}

void close_quietly(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

void throw_io_error(const std::string& what, const std::string& path, int error_number) {
  throw Error(ErrorKind::Io, what + " " + path + ": " + std::strerror(error_number) + " — " +
                                 advice_for(error_number));
}

std::string parent_directory(const std::string& path) {
  auto parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

void fsync_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_io_error("could not open directory", dir, errno);
  // Some file systems (e.g. some FUSE mounts) refuse fsync on directories; their renames are
  // then as durable as they can make them, which is not ours to fix.
  if (::fsync(fd) != 0 && errno != EINVAL && errno != ENOTSUP) {
    int err = errno;
    ::close(fd);
    throw_io_error("could not flush directory", dir, err);
  }
  ::close(fd);
}

void make_directories(const std::string& dir) {
  std::error_code ec;
  bool created = std::filesystem::create_directories(dir, ec);
  if (ec) throw_io_error("could not create directory", dir, ec.value());
  if (!created) return;
  auto normal = std::filesystem::path(dir).lexically_normal();
  if (normal.filename().empty()) normal = normal.parent_path();  // "a/b/" names "a/b"
  fsync_directory(parent_directory(normal.string()));
}

DurableFile::DurableFile(std::string path, bool sync_directory)
    : path_(std::move(path)),
      temp_path_(path_ + ".tmp" + std::to_string(::getpid())),
      sync_directory_(sync_directory) {
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_io_error("could not create", temp_path_, errno);
}

DurableFile::~DurableFile() {
  if (fd_ >= 0) {
    close_quietly(fd_);
    ::unlink(temp_path_.c_str());
  }
}

void DurableFile::write_all(const void* data, size_t size) {
  const auto* p = static_cast<const char*>(data);
  size_t left = size;
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_io_error("could not write", path_, errno);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void DurableFile::write(const void* data, size_t size) {
  if (fd_ < 0) throw Error(ErrorKind::Internal, "write to " + path_ + " after commit");
  // A large piece is checksummed on another core while this one hands it to the kernel; the
  // checksum thread is joined on every way out, a failed write included.
  uint32_t piece_crc = 0;
  {
    std::jthread checksum;
    if (size >= kOverlapBytes) {
      try {
        checksum = std::jthread([&] { piece_crc = checkpoint::crc32c(data, size); });
      } catch (const std::system_error&) {  // no thread to be had: checksum here
        piece_crc = checkpoint::crc32c(data, size);
      }
    } else {
      piece_crc = checkpoint::crc32c(data, size);
    }
    write_all(data, size);
  }
  crc_ = crc32c_combine(crc_, piece_crc, size);
  size_ += size;
}

void DurableFile::commit() {
  if (fd_ < 0) throw Error(ErrorKind::Internal, "commit of " + path_ + " twice");
  // Delayed allocation means a full disk may only show up here.
  if (::fsync(fd_) != 0) throw_io_error("could not flush", path_, errno);
  if (::close(fd_) != 0) {
    fd_ = -1;
    ::unlink(temp_path_.c_str());
    throw_io_error("could not close", path_, errno);
  }
  fd_ = -1;
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    ::unlink(temp_path_.c_str());
    throw_io_error("could not rename into place", path_, err);
  }
  if (sync_directory_) fsync_directory(parent_directory(path_));
}

void write_file_durably(const std::string& path, std::string_view contents) {
  DurableFile file(path);
  file.write(contents);
  file.commit();
}

}  // namespace dsx::checkpoint
