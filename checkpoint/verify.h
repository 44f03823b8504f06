// Checks one checkpoint file on disk against its manifest record: present, the recorded size
// (a shorter file was truncated), and — when asked — the recorded CRC32C (corruption).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "checkpoint/manifest.h"

namespace dsx::checkpoint {

enum class VerifyLevel { Size, Checksum };

// Throws dsx::Error(Format) (Io when unreadable) naming `path` and saying what to do.
void verify_file(const std::string& path, const FileRecord& expected, VerifyLevel level);

// verify_file for several files, on io_threads() threads; throws the first failing file's error.
void verify_files(const std::vector<std::pair<std::string, FileRecord>>& files, VerifyLevel level);

// The same checks of a file's bytes already in memory (mapped by the caller, who then uses them).
void verify_bytes(const std::string& path, const void* data, uint64_t size,
                  const FileRecord& expected);

// Throws verify_file's "is corrupt" error when `crc` is not the record's.
void check_crc32c(const std::string& path, uint32_t crc, const FileRecord& expected);

// Size and CRC32C of a whole file, checksummed in place in the page cache.
FileRecord measure_file(const std::string& path);

}  // namespace dsx::checkpoint
