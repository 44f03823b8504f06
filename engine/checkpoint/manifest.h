// What a checkpoint consists of: every file with its size and CRC32C. Each rank returns a
// RankManifest for the files it wrote; the engine gathers them (as JSON strings) to rank 0, whose
// commit verifies the files against them and stores them all as `<tag>/manifest.json`. A load
// checks every file against that manifest, so a truncated or corrupt file is named, not used.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dsx::engine::checkpoint {

struct FileRecord {
  std::string name;  // relative to the tag directory, e.g. "mp_rank_00_model_states.safetensors"
  uint64_t size = 0;
  uint32_t crc32c = 0;
  bool operator==(const FileRecord&) const = default;
};

struct RankManifest {
  int rank = 0;
  std::vector<FileRecord> files;

  std::string to_json() const;
  // Throws dsx::Error(Format) naming `origin` (e.g. "rank 3's manifest") on malformed input.
  static RankManifest from_json(std::string_view json, const std::string& origin);
  bool operator==(const RankManifest&) const = default;
};

// The whole checkpoint's manifest, written by commit() as `<tag>/manifest.json`.
struct CheckpointManifest {
  std::string tag;
  int world_size = 0;
  std::vector<RankManifest> ranks;  // ordered by rank

  std::string to_json() const;
  static CheckpointManifest from_json(std::string_view json, const std::string& origin);
  // The record of `name`, or nullptr.
  const FileRecord* find(std::string_view name) const;
};

inline constexpr const char* kManifestFile = "manifest.json";
inline constexpr int kManifestVersion = 1;

}  // namespace dsx::engine::checkpoint
