// Saving a checkpoint so that no moment of a crash can lose the previous one (DeepSpeed's
// layout, see layout.h). The protocol, which the engine drives:
//
//   every rank:  RankWriter w(save_dir, tag, rank);
//                w.write_tensor_file(...) for each of its files      -> into .<tag>.saving/
//                send w.manifest().to_json() to rank 0               (engine: gather)
//   rank 0:      commit(save_dir, tag, manifests of all ranks)       verify, swap in, move latest
//   every rank:  barrier                                             (engine)
//
// Each file is written to a temporary name, fsync'd and renamed (DurableFile). commit() checks
// every rank's files against their manifests, writes `<tag>/manifest.json`, swaps the staging
// directory into place atomically and only then replaces `latest` (temp, fsync, rename). On a
// file system all ranks share, rank 0 commits; on nodes' own disks (node_checkpoint.h) each node
// commits its part, in two phases across the nodes.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "checkpoint/durable_file.h"
#include "checkpoint/manifest.h"
#include "checkpoint/tensor_file.h"
#include "checkpoint/verify.h"

namespace dsx::checkpoint {

class RankWriter {
 public:
  // Creates the staging directory (every rank may; it is idempotent). Checks the tag.
  RankWriter(std::string save_dir, std::string tag, int rank);

  // One safetensors file of this rank: `tensors` in order, and `metadata_json` (any JSON object
  // the engine wants back on load: step, schedulers, loss scaler, data position, RNG, config).
  const FileRecord& write_tensor_file(const std::string& file_name,
                                      std::span<const TensorRef> tensors,
                                      std::string_view metadata_json);

  // Any other file: `body` writes its bytes into the DurableFile.
  const FileRecord& write_file(const std::string& file_name,
                               const std::function<void(DurableFile&)>& body);

  const RankManifest& manifest() const { return manifest_; }

 private:
  std::string save_dir_;
  std::string tag_;
  std::string staging_;
  RankManifest manifest_;
};

struct CommitOptions {
  // Checksum re-reads every file (from the page cache, usually); Size only stats them.
  VerifyLevel verify = VerifyLevel::Checksum;
};

// Rank 0, after every rank's RankWriter has finished. Throws (and leaves `latest` and every
// committed tag untouched) when a file is missing, short or differs from its manifest.
// The same as check_staged + install_staged of the manifest of all ranks.
void commit(const std::string& save_dir, const std::string& tag,
            std::span<const RankManifest> manifests, const CommitOptions& options = {});

// The two phases of a commit, for saves whose files lie on several nodes' own disks: each node
// checks its staged files (phase 1); only when every node has, each installs its part (phase 2).
// `manifest` lists the ranks whose files are staged here. check_staged throws as commit does and
// removes staged files no rank lists; install_staged writes manifest.json, swaps the staging
// directory in as `<tag>` and then moves `latest`.
void check_staged(const std::string& save_dir, const CheckpointManifest& manifest,
                  const CommitOptions& options = {});
void install_staged(const std::string& save_dir, const CheckpointManifest& manifest);
// Removes the staging directory of a save that will not be committed here.
void abandon_staged(const std::string& save_dir, const std::string& tag);
// Every rank's manifest as one, ordered by rank; throws when a file is listed twice.
CheckpointManifest gather_manifest(const std::string& tag, int world_size,
                                   std::span<const RankManifest> manifests);

}  // namespace dsx::checkpoint
