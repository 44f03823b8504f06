// CheckpointReader: the load side of the protocol in save.h.
#include "checkpoint/load.h"

#include <sys/stat.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "dsx/error.h"
#include "dsx/json_input.h"
#include "checkpoint/durable_file.h"
#include "checkpoint/layout.h"
#include "checkpoint/verify.h"

namespace dsx::checkpoint {
namespace {

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

CheckpointReader CheckpointReader::open(const std::string& save_dir, const std::string& tag_arg,
                                        bool check_all_sizes) {
  std::string tag = tag_arg;
  if (tag.empty()) {
    tag = read_latest_tag(save_dir);
    try {
      check_tag(tag);
    } catch (const Error& e) {
      throw Error(ErrorKind::Format,
                  latest_file(save_dir) + " does not hold a valid tag: " + e.what());
    }
  } else {
    check_tag(tag);
  }
  CheckpointReader reader;
  reader.directory_ = tag_directory(save_dir, tag);
  if (!is_directory(reader.directory_)) {
    std::string hint = is_directory(staging_directory(save_dir, tag))
                           ? " (a save of this tag was interrupted before it completed)"
                           : "";
    throw Error(ErrorKind::Io, "checkpoint " + reader.directory_ + " does not exist" + hint +
                                   "; pass an existing tag or the directory a save wrote to");
  }
  const std::string manifest_path = reader.directory_ + "/" + kManifestFile;
  struct stat st;
  if (::stat(manifest_path.c_str(), &st) != 0)
    throw Error(ErrorKind::Format, "checkpoint " + reader.directory_ + " has no " + kManifestFile +
                                       ": it was not written by a completed dsx save (a DeepSpeed "
                                       ".pt checkpoint cannot be loaded by dsx directly)");
  reader.manifest_ = CheckpointManifest::from_json(read_bounded_file(manifest_path), manifest_path);
  if (reader.manifest_.tag != tag)
    throw Error(ErrorKind::Format, manifest_path + " belongs to tag \"" + reader.manifest_.tag +
                                       "\", not \"" + tag +
                                       "\": the directory was renamed or "
                                       "copied over; load it by its original tag");
  if (check_all_sizes)
    for (const auto& rank : reader.manifest_.ranks)
      for (const auto& file : rank.files)
        verify_file(reader.directory_ + "/" + file.name, file, VerifyLevel::Size);
  return reader;
}

TensorFile CheckpointReader::read_tensor_file(const std::string& file_name) const {
  const FileRecord* record = manifest_.find(file_name);
  if (!record)
    throw Error(ErrorKind::Format, "checkpoint " + directory_ + " has no file " + file_name +
                                       " in its manifest: it was saved with a different world "
                                       "size or configuration");
  const std::string path = directory_ + "/" + file_name;
  // The checksum pass leaves the file in the page cache, so the parse reads no disk again.
  verify_file(path, *record, VerifyLevel::Checksum);
  return TensorFile::load(path);
}

void CheckpointReader::verify_all() const {
  for (const auto& rank : manifest_.ranks)
    for (const auto& file : rank.files)
      verify_file(directory_ + "/" + file.name, file, VerifyLevel::Checksum);
}

}  // namespace dsx::checkpoint
