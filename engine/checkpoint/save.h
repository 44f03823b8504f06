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
// directory into place atomically and only then replaces `latest` (temp, fsync, rename). Saving
// needs a file system that all ranks share, as DeepSpeed's does.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "engine/checkpoint/durable_file.h"
#include "engine/checkpoint/manifest.h"
#include "engine/checkpoint/tensor_file.h"
#include "engine/checkpoint/verify.h"

namespace dsx::engine::checkpoint {

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
void commit(const std::string& save_dir, const std::string& tag,
            std::span<const RankManifest> manifests, const CommitOptions& options = {});

}  // namespace dsx::engine::checkpoint
