// CheckpointReader: the load side of the protocol in save.h.
#include "checkpoint/load.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "dsx/error.h"
#include "dsx/join.h"
#include "dsx/json_input.h"
#include "checkpoint/durable_file.h"
#include "checkpoint/layout.h"
#include "checkpoint/parallel_bytes.h"
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

std::string CheckpointReader::model_states_file() const {
  if (contains(model_states_file_name())) return model_states_file_name();
  for (const auto& rank : manifest_.ranks)  // ordered by rank
    if (contains(zero_model_states_file_name(rank.rank))) return zero_model_states_file_name(rank.rank);
  return model_states_file_name();  // read_tensor_file then says it is missing
}

const FileRecord& CheckpointReader::record_of(const std::string& file_name) const {
  const FileRecord* record = manifest_.find(file_name);
  if (!record)
    throw Error(ErrorKind::Format, "checkpoint " + directory_ + " has no file " + file_name +
                                       " in its manifest: it was saved with a different world "
                                       "size or configuration");
  return *record;
}

TensorFile CheckpointReader::read_tensor_file(const std::string& file_name) const {
  const FileRecord& record = record_of(file_name);
  const std::string path = directory_ + "/" + file_name;
  verify_file(path, record, VerifyLevel::Size);  // missing or truncated: said as such
  // One mapping, its page tables filled at once: checksummed in place, then parsed and read from.
  models::MappedFile mapped(path, /*populate=*/true);
  verify_bytes(path, mapped.data(), mapped.size(), record);
  return TensorFile::parse(std::move(mapped));
}

namespace {

// A file mapped and its header parsed for a one-pass load: where each requested tensor lies.
struct OnePassFile {
  TensorFile file;
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::vector<CopyRange> ranges;  // one per request, in its order
};

// `Request` has name, dtype and numel. The header is parsed before the bytes are verified (it
// says where the tensors lie); when it or a tensor's dtype and size do not parse, a damaged file
// is reported as damaged.
template <class Request>
OnePassFile map_for_one_pass(const std::string& path, const FileRecord& record,
                             std::span<const Request> tensors) {
  verify_file(path, record, VerifyLevel::Size);
  models::MappedFile mapped(path, /*populate=*/true);
  OnePassFile one{{}, mapped.data(), mapped.size(), {}};
  if (one.size != record.size) verify_bytes(path, one.data, one.size, record);  // shrank since
  try {
    one.file = TensorFile::parse(std::move(mapped));
    for (const Request& t : tensors) {
      const models::TensorView& v = one.file.checked_view(t.name, t.dtype, t.numel);
      one.ranges.push_back({static_cast<size_t>(v.data - one.data), v.bytes, nullptr});
    }
  } catch (const Error&) {
    const models::MappedFile again(path);  // a failed parse has unmapped its copy
    verify_bytes(path, again.data(), again.size(), record);
    throw;
  }
  return one;
}

}  // namespace

TensorFile CheckpointReader::read_tensor_file_into(
    const std::string& file_name, std::span<const TensorDestination> tensors) const {
  const std::string path = directory_ + "/" + file_name;
  OnePassFile one = map_for_one_pass(path, record_of(file_name), tensors);
  for (size_t i = 0; i < tensors.size(); ++i) one.ranges[i].dst = tensors[i].dst;
  check_crc32c(path, crc32c_and_copy(one.data, one.size, one.ranges), record_of(file_name));
  return std::move(one.file);
}

TensorFile CheckpointReader::read_tensor_file_visiting(const std::string& file_name,
                                                       std::span<const TensorToVisit> tensors,
                                                       const TensorBytesVisitor& visit) const {
  const std::string path = directory_ + "/" + file_name;
  OnePassFile one = map_for_one_pass(path, record_of(file_name), tensors);
  check_crc32c(path, crc32c_and_visit(one.data, one.size, one.ranges, visit), record_of(file_name));
  return std::move(one.file);
}

bool looks_like_checkpoint(const std::string& folder) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(folder, ec)) {
    const std::string file = entry.path().filename().string();
    if (file == kManifestFile || file.find("model_states") != std::string::npos ||
        file.find("optim_states") != std::string::npos)
      return true;
  }
  return false;
}

namespace {

// Why `latest` cannot be followed ("" when it can): missing, or empty (a crash of a file system
// that does not keep renames in order, or a user's truncation).
std::string latest_unusable(const std::string& save_dir) {
  const std::string path = latest_file(save_dir);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) return "there is no " + path;
  try {
    read_latest_tag(save_dir);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Format) return path + " is empty";  // unreadable (Io): reported as is
    throw;
  }
  return "";
}

struct Folder {
  std::string tag;
  int64_t step = -1;  // the manifest's, else the N of global_step<N>
  std::filesystem::file_time_type committed;  // manifest.json's time: orders saves of equal step
};

int64_t step_of(const CheckpointManifest& m) {
  if (m.step >= 0) return m.step;
  const std::string prefix = default_tag(0).substr(0, default_tag(0).size() - 1);  // "global_step"
  if (!m.tag.starts_with(prefix) || m.tag.size() == prefix.size()) return -1;
  for (size_t i = prefix.size(); i < m.tag.size(); ++i)
    if (m.tag[i] < '0' || m.tag[i] > '9') return -1;
  return std::stoll(m.tag.substr(prefix.size()));
}

}  // namespace

LatestCheckpoint find_latest_checkpoint(const std::string& save_dir) {
  const std::string why = latest_unusable(save_dir);
  if (why.empty()) return {true, read_latest_tag(save_dir), ""};
  // The folders that look like checkpoints, newest first; each is verified in full only until one
  // passes, so an intact newest folder costs one read of its files.
  std::vector<Folder> folders;
  std::vector<std::string> refused;  // "tag (why)"
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(save_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name.starts_with(".") || !looks_like_checkpoint(entry.path())) continue;
    try {
      const CheckpointReader reader = CheckpointReader::open(save_dir, name, /*check_all_sizes=*/false);
      folders.push_back({name, step_of(reader.manifest()),
                         std::filesystem::last_write_time(reader.directory() + "/" + kManifestFile)});
    } catch (const Error& e) {
      refused.push_back(name + " (" + e.what() + ")");
    }
  }
  if (folders.empty() && refused.empty()) return {};
  std::sort(folders.begin(), folders.end(), [](const Folder& a, const Folder& b) {
    return a.step != b.step ? a.step > b.step : a.committed > b.committed;
  });
  for (const Folder& f : folders) {
    try {
      CheckpointReader::open(save_dir, f.tag).verify_all();
    } catch (const Error& e) {
      refused.push_back(f.tag + " (" + e.what() + ")");
      continue;
    }
    std::string note = why + "; a load takes " + tag_directory(save_dir, f.tag) +
                       ", the newest checkpoint whose files all verify";
    if (!refused.empty()) note += " (not: " + join(refused, "; ") + ")";
    return {true, f.tag, note};
  }
  throw Error(ErrorKind::Format, why + ", and no checkpoint folder in " + save_dir + " verifies: " +
                                     join(refused, "; ") +
                                     ". Restore `latest` or the damaged file, or name a folder with --tag; "
                                     "dsx does not start from scratch over them");
}

void CheckpointReader::verify_all() const {
  std::vector<std::pair<std::string, FileRecord>> files;
  for (const auto& rank : manifest_.ranks)
    for (const auto& file : rank.files) files.emplace_back(directory_ + "/" + file.name, file);
  verify_files(files, VerifyLevel::Checksum);
}

}  // namespace dsx::checkpoint
