// `dsx checkpoint list DIR` and `dsx checkpoint verify DIR [--tag T]`: what checkpoints a save
// directory holds, and whether one is complete and intact (every file's size and CRC32C against
// its manifest) — the same checks a load makes, without loading.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "dsx/error.h"
#include "dsx/join.h"
#include "checkpoint/layout.h"
#include "checkpoint/load.h"
#include "tools/cli.h"

namespace dsx::tools {
namespace {

namespace ck = dsx::checkpoint;

constexpr const char* kUsage =
    "dsx checkpoint list DIR              the tags in DIR, the one `latest` names, their sizes\n"
    "       dsx checkpoint verify DIR [--tag T]  check every file of a checkpoint (default: "
    "latest)";

// "2 ranks, ", or on node-local storage which part this directory holds: "node 1 of 2: ranks 2-3
// of 4, ".
std::string ranks_text(const ck::CheckpointManifest& m) {
  if (!m.node) return std::to_string(m.world_size) + (m.world_size == 1 ? " rank, " : " ranks, ");
  const int first = m.ranks.front().rank, last = m.ranks.back().rank;
  return "node " + std::to_string(m.node->index) + " of " + std::to_string(m.node->count) + ": " +
         (first == last ? "rank " + std::to_string(first) : "ranks " + std::to_string(first) + "-" + std::to_string(last)) +
         " of " + std::to_string(m.world_size) + ", ";
}

std::string megabytes(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MB", static_cast<double>(bytes) / 1e6);
  return text;
}

uint64_t total_bytes(const ck::CheckpointManifest& m) {
  uint64_t total = 0;
  for (const auto& r : m.ranks)
    for (const auto& f : r.files) total += f.size;
  return total;
}

// A tag folder holds a save's files (or the marker of one that did not finish); anything else in
// a save directory - the monitors' logs, a user's own folder - is not a damaged checkpoint.
bool looks_like_checkpoint(const std::filesystem::path& folder, bool named_by_latest) {
  return named_by_latest || folder.filename().string().starts_with(".") || ck::looks_like_checkpoint(folder);
}

int list(const std::string& dir) {
  if (!std::filesystem::is_directory(dir))
    throw Error(ErrorKind::Io, dir + " is not a directory: pass the directory a save wrote to");
  std::string latest;
  try {
    latest = ck::read_latest_tag(dir);
  } catch (const Error&) {
  }
  std::vector<std::string> names, others;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (!entry.is_directory()) continue;
    const std::string name = entry.path().filename().string();
    (looks_like_checkpoint(entry.path(), name == latest) ? names : others).push_back(name);
  }
  std::sort(names.begin(), names.end());
  std::sort(others.begin(), others.end());
  std::cout << "checkpoints in " << dir << " (latest: " << (latest.empty() ? "none" : latest)
            << ")\n";
  for (const auto& name : names) {
    const bool is_latest = name == latest;
    if (name.starts_with(".") && name.ends_with(".saving")) {
      std::cout << "    " << name << "  incomplete: a save that did not finish (never loaded)\n";
      continue;
    }
    try {
      auto reader = ck::CheckpointReader::open(dir, name);
      std::cout << (is_latest ? "  * " : "    ") << name << "  " << ranks_text(reader.manifest())
                << megabytes(total_bytes(reader.manifest())) << "\n";
    } catch (const Error& e) {
      std::cout << (is_latest ? "  * " : "    ") << name << "  not loadable: " << e.what() << "\n";
    }
  }
  if (!others.empty()) std::cout << "other folders (not checkpoints): " << join(others, ", ") << "\n";
  return 0;
}

// Without --tag, the checkpoint `dsx train --load` takes (find_latest_checkpoint), so that the two
// agree also when `latest` is missing or empty.
int verify(const std::string& dir, std::string tag) {
  if (tag.empty()) {
    const ck::LatestCheckpoint latest = ck::find_latest_checkpoint(dir);
    if (latest.found) tag = latest.tag;  // else open() says there is nothing to load
    if (!latest.note.empty()) std::cout << "note: " << latest.note << "\n";
  }
  auto reader = ck::CheckpointReader::open(dir, tag);
  reader.verify_all();
  size_t files = 0;
  for (const auto& r : reader.manifest().ranks) files += r.files.size();
  std::cout << "checkpoint " << reader.directory() << ": " << ranks_text(reader.manifest())
            << files << " files, " << megabytes(total_bytes(reader.manifest()))
            << "; every size and CRC32C matches its manifest\n";
  if (reader.manifest().node)
    std::cout << "the other ranks' files are on the other nodes' disks: verify there too\n";
  return 0;
}

}  // namespace

int run_checkpoint(int argc, char** argv) {
  std::string verb, dir, tag;
  po::options_description options("dsx checkpoint");
  options.add_options()("tag", po::value(&tag),
                        "verify this tag instead of the one `latest` names");
  po::options_description hidden;
  hidden.add_options()("verb", po::value(&verb), "list or verify")("dir", po::value(&dir),
                                                                   "the save directory");
  po::positional_options_description positional;
  positional.add("verb", 1).add("dir", 1);
  options.add(hidden);
  auto args = parse_args(argc, argv, kUsage, options, &positional);
  if (args.help) return 0;
  if (verb.empty() || dir.empty()) throw Error(ErrorKind::Usage, std::string("usage: ") + kUsage);
  if (verb == "list") return list(dir);
  if (verb == "verify") return verify(dir, tag);
  throw Error(ErrorKind::Usage, "dsx checkpoint: unknown verb '" + verb + "'; use list or verify");
}

}  // namespace dsx::tools
