// RankWriter and commit(): the write side of the checkpoint protocol in save.h.
#include "checkpoint/save.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <set>

#include "dsx/error.h"
#include "checkpoint/layout.h"

namespace dsx::checkpoint {
namespace {

void check_file_name(const std::string& name) {
  if (name.empty() || name[0] == '.' || name.find('/') != std::string::npos ||
      name == kManifestFile)
    throw Error(ErrorKind::Internal, "checkpoint file name \"" + name +
                                         "\" must be a plain, non-hidden name other than " +
                                         kManifestFile);
}

// Removes what a killed earlier save may have left in the staging directory: files no manifest
// lists (e.g. from a larger world size) and temporary files.
void remove_unlisted(const std::string& staging, const std::set<std::string>& listed) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(staging, ec)) {
    std::string name = entry.path().filename().string();
    if (!listed.count(name)) std::filesystem::remove_all(entry.path(), ec);
  }
  if (ec) throw_io_error("could not clean staging directory", staging, ec.value());
}

// Moves the complete staging directory to `<tag>` (only rank 0 does this). When `<tag>` exists
// (the same tag saved again) the two are exchanged atomically, so `<tag>` is never absent or
// half-written.
void swap_into_place(const std::string& staging, const std::string& target) {
  struct stat st;
  if (::stat(target.c_str(), &st) != 0) {
    if (::rename(staging.c_str(), target.c_str()) != 0)
      throw_io_error("could not move the new checkpoint to", target, errno);
    return;
  }
  if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) != 0) {
    if (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP)
      throw Error(ErrorKind::Unsupported,
                  "cannot replace the existing checkpoint " + target +
                      " atomically: this file system does not support exchanging directories "
                      "(renameat2 RENAME_EXCHANGE). Save under a new tag, or remove the old "
                      "directory first; the new checkpoint is complete in " +
                      staging);
    throw_io_error("could not exchange the new checkpoint with", target, errno);
  }
  // The old copy now sits at the staging name.
  std::error_code ec;
  std::filesystem::remove_all(staging, ec);
}

// What saves killed before or during their commit leave: staging directories with partial copies
// of a checkpoint (gigabytes, for a large model), and `latest.tmp<pid>` from a kill while `latest`
// was replaced. Saves of one job run one at a time, so once this commit is done any of them in
// save_dir is such a leftover.
void remove_abandoned_saves(const std::string& save_dir) {
  const std::string latest_temp = std::filesystem::path(latest_file(save_dir)).filename().string() + ".tmp";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(save_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if ((name.starts_with(".") && name.ends_with(".saving")) || name.starts_with(latest_temp))
      std::filesystem::remove_all(entry.path(), ec);
  }
}

}  // namespace

RankWriter::RankWriter(std::string save_dir, std::string tag, int rank)
    : save_dir_(std::move(save_dir)), tag_(std::move(tag)) {
  check_tag(tag_);
  if (rank < 0) throw Error(ErrorKind::Internal, "RankWriter: negative rank");
  manifest_.rank = rank;
  staging_ = staging_directory(save_dir_, tag_);
  make_directories(staging_);
}

const FileRecord& RankWriter::write_file(const std::string& file_name,
                                         const std::function<void(DurableFile&)>& body) {
  check_file_name(file_name);
  for (const auto& f : manifest_.files)
    if (f.name == file_name)
      throw Error(ErrorKind::Internal, "checkpoint file " + file_name + " written twice");
  // The staging directory is fsync'd once, at commit, for all ranks' renames.
  DurableFile file(staging_ + "/" + file_name, /*sync_directory=*/false);
  body(file);
  file.commit();
  manifest_.files.push_back({file_name, file.size(), file.crc32c()});
  return manifest_.files.back();
}

const FileRecord& RankWriter::write_tensor_file(const std::string& file_name,
                                                std::span<const TensorRef> tensors,
                                                std::string_view metadata_json) {
  return write_file(file_name,
                    [&](DurableFile& file) { write_safetensors(file, tensors, metadata_json); });
}

CheckpointManifest gather_manifest(const std::string& tag, int world_size,
                                   std::span<const RankManifest> manifests) {
  check_tag(tag);
  CheckpointManifest all;
  all.tag = tag;
  all.world_size = world_size;
  all.ranks.assign(manifests.begin(), manifests.end());
  std::sort(all.ranks.begin(), all.ranks.end(),
            [](const RankManifest& a, const RankManifest& b) { return a.rank < b.rank; });
  std::set<std::string> listed;
  for (const auto& rank : all.ranks)
    for (const auto& file : rank.files)
      if (!listed.insert(file.name).second)
        throw Error(ErrorKind::Internal,
                    "commit of " + tag + ": file " + file.name + " is written by two ranks");
  return all;
}

void check_staged(const std::string& save_dir, const CheckpointManifest& manifest,
                  const CommitOptions& options) {
  const std::string staging = staging_directory(save_dir, manifest.tag);
  std::set<std::string> listed{kManifestFile};
  std::vector<std::pair<std::string, FileRecord>> files;
  for (const auto& rank : manifest.ranks) {
    for (const auto& file : rank.files) {
      listed.insert(file.name);
      files.emplace_back(staging + "/" + file.name, file);
    }
  }
  verify_files(files, options.verify);
  remove_unlisted(staging, listed);
}

void install_staged(const std::string& save_dir, const CheckpointManifest& manifest) {
  const std::string staging = staging_directory(save_dir, manifest.tag);
  // Also makes every rank's rename into the staging directory durable (one directory fsync).
  write_file_durably(staging + "/" + kManifestFile, manifest.to_json());
  swap_into_place(staging, tag_directory(save_dir, manifest.tag));
  fsync_directory(save_dir);
  write_file_durably(latest_file(save_dir), manifest.tag);  // DeepSpeed writes the bare tag
  remove_abandoned_saves(save_dir);
}

void abandon_staged(const std::string& save_dir, const std::string& tag) {
  std::error_code ec;
  std::filesystem::remove_all(staging_directory(save_dir, tag), ec);
}

void commit(const std::string& save_dir, const std::string& tag,
            std::span<const RankManifest> manifests, const CommitOptions& options) {
  const CheckpointManifest all =
      gather_manifest(tag, static_cast<int>(manifests.size()), manifests);
  for (int r = 0; r < all.world_size; ++r)
    if (all.ranks[r].rank != r)
      throw Error(ErrorKind::Internal, "commit of " + tag +
                                           ": the manifests are not one per "
                                           "rank 0.." +
                                           std::to_string(all.world_size - 1));
  check_staged(save_dir, all, options);
  install_staged(save_dir, all);
}

}  // namespace dsx::checkpoint
