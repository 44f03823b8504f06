// File plumbing of the model and data formats: a read-only memory map (weights, token shards,
// text), a whole small file read as text (config.json, the shard index) and an atomic writer (temp file in the same directory, fsync, rename) so a crash never
// leaves a half-written weights file under the final name. Errors are dsx::Error(Io) naming
// the file and the failing operation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dsx::models {

class MappedFile {
 public:
  // populate: fill the page tables at once (MAP_POPULATE), for a caller that reads every byte:
  // one call instead of a page fault per 64 KiB.
  explicit MappedFile(const std::string& path, bool populate = false);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// The file's bytes; Error(Io) "cannot read 'path'; <why>" when it cannot be opened.
std::string read_text_file(const std::string& path, const std::string& why);

class AtomicWriter {
 public:
  explicit AtomicWriter(std::string path);
  ~AtomicWriter();  // without commit() the temporary file is removed
  AtomicWriter(const AtomicWriter&) = delete;
  AtomicWriter& operator=(const AtomicWriter&) = delete;

  void write(const void* data, size_t size);
  void commit();  // fsync, rename over the final name, fsync the directory

 private:
  std::string path_, temp_path_;
  int fd_ = -1;
};

}  // namespace dsx::models
