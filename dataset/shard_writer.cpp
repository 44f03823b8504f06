// Streamed, atomic token shards (see shard_writer.h).
#include "dataset/shard_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "dsx/error.h"
#include "models/data/token_files.h"

namespace dsx::dataset {

ShardWriter::ShardWriter(std::string dir, std::string name, uint64_t shard_tokens,
                         size_t token_bytes)
    : dir_(std::move(dir)),
      name_(std::move(name)),
      shard_tokens_(shard_tokens),
      token_bytes_(token_bytes) {
  if (shard_tokens_ < 1 || shard_tokens_ > 0x7fffffffu) {
    throw Error(ErrorKind::Usage,
                "shard size " + std::to_string(shard_tokens_) +
                    " tokens: give 1 .. 2147483647 (the header's count is an int32)");
  }
  models::token_shard_header(0, token_bytes_);  // checks the width
}

ShardWriter::~ShardWriter() {
  if (fd_ >= 0) {
    ::close(fd_), ::unlink(temp_path_.c_str());
  }
}

std::string ShardWriter::shard_path(uint64_t index) const {
  char number[32];
  std::snprintf(number, sizeof(number), "%06llu", static_cast<unsigned long long>(index));
  return dir_ + "/" + name_ + "_" + number + ".bin";
}

void ShardWriter::fail(const std::string& what) const {
  throw Error(ErrorKind::Io, "token shard '" + temp_path_ + "': " + what + " (" +
                                 std::strerror(errno) +
                                 "); check the free space and permissions of " + dir_);
}

void ShardWriter::write_all(const void* data, size_t size) {
  auto* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      fail("write failed");
    }
    p += n, size -= static_cast<size_t>(n);
  }
}

void ShardWriter::open_shard() {
  const std::string final_path = shard_path(files_.size());
  const std::string base = final_path.substr(dir_.size() + 1);
  temp_path_ = dir_ + "/." + base + ".tmp-" + std::to_string(::getpid());
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    fail("cannot create");
  }
  auto header = models::token_shard_header(0, token_bytes_);  // the count is set at commit
  write_all(header.data(), header.size() * sizeof(int32_t));
  in_shard_ = 0;
}

void ShardWriter::commit_shard() {
  auto header = models::token_shard_header(in_shard_, token_bytes_);
  if (::pwrite(fd_, header.data(), header.size() * sizeof(int32_t), 0) != 1024) {
    fail("header write failed");
  }
  if (::fsync(fd_) != 0) {
    fail("fsync failed");
  }
  ::close(fd_), fd_ = -1;
  const std::string final_path = shard_path(files_.size());
  if (::rename(temp_path_.c_str(), final_path.c_str()) != 0) {
    fail("rename to '" + final_path + "' failed");
  }
  int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd), ::close(dfd);  // the rename itself survives a crash
  }
  files_.push_back(final_path);
}

void ShardWriter::append(std::span<const int32_t> ids) {
  const int64_t limit = token_bytes_ == 2 ? 0x10000 : 0x100000000ll;
  while (!ids.empty()) {
    if (fd_ < 0) {
      open_shard();
    }
    const size_t n = static_cast<size_t>(std::min<uint64_t>(ids.size(), shard_tokens_ - in_shard_));
    staging_.resize(n * token_bytes_);
    for (size_t i = 0; i < n; ++i) {
      const int64_t id = ids[i];
      if (id < 0 || id >= limit) {
        throw Error(ErrorKind::Internal, "token id " + std::to_string(id) + " does not fit a " +
                                             std::to_string(token_bytes_) + "-byte shard token");
      }
      const auto v = static_cast<uint32_t>(id);
      std::memcpy(staging_.data() + i * token_bytes_, &v, token_bytes_);  // little-endian hosts
    }
    write_all(staging_.data(), staging_.size());
    in_shard_ += n, tokens_ += n, ids = ids.subspan(n);
    if (in_shard_ == shard_tokens_) {
      commit_shard();
    }
  }
}

void ShardWriter::finish() {
  if (fd_ >= 0) {
    commit_shard();
  }
}

}  // namespace dsx::dataset
