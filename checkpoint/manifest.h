// What a checkpoint consists of: every file with its size and CRC32C. Each rank returns a
// RankManifest for the files it wrote; the engine gathers them (as JSON strings) to rank 0, whose
// commit verifies the files against them and stores them all as `<tag>/manifest.json`. A load
// checks every file against that manifest, so a truncated or corrupt file is named, not used.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dsx::checkpoint {

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

// Where a checkpoint's files are: on one directory every rank sees, or spread over the nodes'
// own disks (checkpoint.use_node_local_storage), each node holding its ranks' files.
struct NodePart {
  int index = 0;  // this node, 0..count-1 (nodes numbered by their lowest rank)
  int count = 1;
};

// The whole checkpoint's manifest, written by commit() as `<tag>/manifest.json`. On node-local
// storage each node's copy lists only that node's ranks, and `node` says which node it is.
struct CheckpointManifest {
  std::string tag;
  int world_size = 0;
  std::vector<RankManifest> ranks;  // ordered by rank; on node-local storage, this node's only
  std::optional<NodePart> node;
  // Which save wrote it: the same tag saved twice has two ids, so nodes can tell whether their
  // copies of a tag are one checkpoint. `step` orders saves. Empty / -1 in older manifests.
  std::string save_id;
  int64_t step = -1;

  std::string to_json() const;
  static CheckpointManifest from_json(std::string_view json, const std::string& origin);
  // The record of `name`, or nullptr.
  const FileRecord* find(std::string_view name) const;
};

inline constexpr const char* kManifestFile = "manifest.json";
inline constexpr int kManifestVersion = 1;

}  // namespace dsx::checkpoint
