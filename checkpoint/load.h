// Opening a checkpoint for loading: resolves `latest`, checks the tag directory against its
// manifest (every file present with its recorded size) and hands out its files, each checked
// against its CRC32C when it is opened for reading.
// A truncated, corrupt or incomplete checkpoint is refused with an error naming the file.
#pragma once

#include <functional>
#include <span>
#include <string>

#include "checkpoint/manifest.h"
#include "checkpoint/tensor_file.h"

namespace dsx::checkpoint {

// A tensor for read_tensor_file_into: `numel` elements of `dtype` go to `dst`.
struct TensorDestination {
  std::string name;
  TensorDType dtype = TensorDType::F32;
  void* dst = nullptr;
  uint64_t numel = 0;
};

// A tensor for read_tensor_file_visiting: `numel` elements of `dtype`, used where they lie.
struct TensorToVisit {
  std::string name;
  TensorDType dtype = TensorDType::F32;
  uint64_t numel = 0;
};

// Bytes [offset, offset + size) of tensors[tensor] at `bytes`, valid only during the call.
using TensorBytesVisitor =
    std::function<void(size_t tensor, uint64_t offset, const uint8_t* bytes, size_t size)>;

class CheckpointReader {
 public:
  // `tag` empty: the tag named by `<save_dir>/latest`. check_all_sizes: stat every rank's file
  // (a truncated one is refused here); with hundreds of ranks each opening the checkpoint on a
  // shared file system, pass false: each rank's own files are still checked when it reads them.
  static CheckpointReader open(const std::string& save_dir, const std::string& tag = "",
                               bool check_all_sizes = true);

  const std::string& tag() const { return manifest_.tag; }
  const std::string& directory() const { return directory_; }
  const CheckpointManifest& manifest() const { return manifest_; }
  int world_size() const { return manifest_.world_size; }
  bool contains(const std::string& file_name) const { return manifest_.find(file_name) != nullptr; }

  // The model-states file that holds the weights: mp_rank_00_model_states (stages 0-2), else the
  // lowest listed rank's zero_pp_rank_<r>_mp_rank_00_model_states (stage 3: rank 0's, or on a
  // node's disk its first rank's).
  std::string model_states_file() const;

  // Maps `file_name`, checks its size and CRC32C (every byte, before any is parsed or handed out)
  // and parses it as safetensors; its tensors are read from that one mapping.
  TensorFile read_tensor_file(const std::string& file_name) const;

  // read_tensor_file with `tensors` copied into their buffers in the same pass that checksums
  // the file (each block checksummed, then copied while still in the cache): memory is read once
  // instead of twice. It returns only once every byte has verified; when it throws, the buffers
  // may hold unverified bytes and must not be used. A damaged file is named as such even where
  // its header no longer parses.
  TensorFile read_tensor_file_into(const std::string& file_name,
                                   std::span<const TensorDestination> tensors) const;

  // read_tensor_file_into for a consumer that uses the tensors where they lie (a sum, a
  // conversion, a write elsewhere): `visit` gets each tensor's bytes in file order, a piece at a
  // time, right after the block holding it was checksummed, while it is still in the cache, so
  // memory is read once. The pieces arrive before the whole file has verified: what the consumer
  // made of them must be dropped when this throws (as read_tensor_file_into's buffers).
  TensorFile read_tensor_file_visiting(const std::string& file_name,
                                       std::span<const TensorToVisit> tensors,
                                       const TensorBytesVisitor& visit) const;

  // Re-reads every file and checks its CRC32C (what `open` skips to stay cheap).
  void verify_all() const;

 private:
  const FileRecord& record_of(const std::string& file_name) const;  // throws when not listed

  std::string directory_;
  CheckpointManifest manifest_;
};

// What a load of `save_dir` takes when no tag is given: the tag `latest` names. When `latest` is
// missing or empty but the directory holds checkpoint folders (a lost `latest` must never make a
// run start from scratch and then overwrite them), the newest folder whose every file verifies
// (size and CRC32C), with `note` saying so and naming the newer ones that do not. Throws
// dsx::Error(Format) naming every folder when none verifies. `found` is false only when the
// directory holds no `latest` and no checkpoint folder (a first run).
struct LatestCheckpoint {
  bool found = false;
  std::string tag;
  std::string note;
};
LatestCheckpoint find_latest_checkpoint(const std::string& save_dir);

// Whether a folder of a save directory holds a checkpoint's files: a manifest or DeepSpeed's
// model/optimizer states. Anything else there (a monitor's logs, a user's folder) is not one.
bool looks_like_checkpoint(const std::string& folder);

}  // namespace dsx::checkpoint
