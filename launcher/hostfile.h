// The MPI-style hostfile of the `deepspeed` launcher: one `HOST slots=N` per line, blank lines
// and `#` comments ignored, text after the slot count ignored. dsx refuses what DeepSpeed's regex
// would misread: a slot count that is not a whole number (`slots=2.5`) or too large. Errors name the file and line and
// keep DeepSpeed's wording so that users can search for them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dsx::launcher {

struct HostfileEntry {
  std::string host;
  int slots = 0;
  int line = 0;  // 1-based line in the file, for messages
  bool operator==(const HostfileEntry&) const = default;
};

// Parses hostfile text. `path` is only used in messages. Throws dsx::Error(Launch) on a bad
// line, a duplicate host, or a file without entries.
std::vector<HostfileEntry> parse_hostfile(std::string_view text, const std::string& path);

// Reads and parses `path`. Returns nullopt when `path` does not exist (DeepSpeed then proceeds
// with local resources); throws when it is a directory, or exists but is unreadable or bad.
std::optional<std::vector<HostfileEntry>> read_hostfile(const std::string& path);

}  // namespace dsx::launcher
