// Checks one checkpoint file on disk against its manifest record: present, the recorded size
// (a shorter file was truncated), and — when asked — the recorded CRC32C (corruption).
#pragma once

#include <string>

#include "checkpoint/manifest.h"

namespace dsx::checkpoint {

enum class VerifyLevel { Size, Checksum };

// Throws dsx::Error(Format) (Io when unreadable) naming `path` and saying what to do.
void verify_file(const std::string& path, const FileRecord& expected, VerifyLevel level);

// Size and CRC32C of a whole file, read in large chunks.
FileRecord measure_file(const std::string& path);

}  // namespace dsx::checkpoint
