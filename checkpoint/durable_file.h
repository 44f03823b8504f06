// Files that are either complete or absent. A DurableFile is written under a temporary name in
// its final directory, fsync'd, renamed over the final name and the directory fsync'd, so a
// crash at any moment leaves the old file or the new one, never a mix. The size and CRC32C of
// what was written are computed on the way, for the checkpoint manifest (a large piece's CRC on
// another core while this one writes it).
//
// Every failure throws dsx::Error(Io) naming the file, the operation and what to do (disk full,
// file-size limit, permissions, read-only file system).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dsx::checkpoint {

class DurableFile {
 public:
  // sync_directory: fsync the directory after the rename. A file in a directory that is itself
  // fsync'd later (a checkpoint's staging directory, at commit) can skip that.
  explicit DurableFile(std::string path, bool sync_directory = true);
  ~DurableFile();  // not committed: the temporary file is removed, the final name untouched
  DurableFile(const DurableFile&) = delete;
  DurableFile& operator=(const DurableFile&) = delete;

  void write(const void* data, size_t size);  // all bytes or an error
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  void commit();  // fsync, rename into place, fsync the directory

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  uint32_t crc32c() const { return crc_; }

 private:
  static constexpr size_t kOverlapBytes = 4u << 20;  // pieces this large: CRC beside the write
  void write_all(const void* data, size_t size);

  std::string path_;
  std::string temp_path_;
  bool sync_directory_ = true;
  int fd_ = -1;
  uint64_t size_ = 0;
  uint32_t crc_ = 0;
};

// Writes `contents` to `path` durably (as DurableFile does).
void write_file_durably(const std::string& path, std::string_view contents);

// Makes `dir` and its parents; fsyncs `dir`'s parent so a new directory survives a crash.
void make_directories(const std::string& dir);
void fsync_directory(const std::string& dir);

// The parent directory of a path ("." when it has none).
std::string parent_directory(const std::string& path);

// Throws dsx::Error(Io): "<what> <path>: <strerror> — <advice for that errno>".
[[noreturn]] void throw_io_error(const std::string& what, const std::string& path,
                                 int error_number);

}  // namespace dsx::checkpoint
