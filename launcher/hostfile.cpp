// Hostfile parsing with DeepSpeed's grammar: the stripped line must match `^(\S+)\s+slots=(\d+)`.
#include "launcher/hostfile.h"

#include <sys/stat.h>

#include <cctype>
#include <fstream>
#include <sstream>

#include "dsx/error.h"

namespace dsx::launcher {
namespace {

constexpr int kMaxSlots = 1 << 16;  // far above any node; guards the integer conversion

std::string_view strip(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Matches `^(\S+)\s+slots=(\d+)` on an already stripped line.
bool match_entry(std::string_view line, std::string* host, long* slots) {
  size_t i = 0;
  while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
  if (i == 0 || i == line.size()) return false;
  *host = std::string(line.substr(0, i));
  while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
  std::string_view rest = line.substr(i);
  if (rest.substr(0, 6) != "slots=") return false;
  rest.remove_prefix(6);
  size_t digits = 0;
  long value = 0;
  while (digits < rest.size() && std::isdigit(static_cast<unsigned char>(rest[digits]))) {
    value = std::min<long>(value * 10 + (rest[digits] - '0'), kMaxSlots + 1);
    ++digits;
  }
  if (digits == 0) return false;
  *slots = value;
  return true;
}

[[noreturn]] void fail(const std::string& path, int line, const std::string& what) {
  throw Error(ErrorKind::Launch, "hostfile " + path + ":" + std::to_string(line) + ": " + what);
}

}  // namespace

std::vector<HostfileEntry> parse_hostfile(std::string_view text, const std::string& path) {
  std::vector<HostfileEntry> entries;
  int line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = strip(text.substr(pos, end - pos));
    ++line_no;
    pos = end + 1;
    if (line.empty() || line.front() == '#') continue;
    std::string host;
    long slots = 0;
    if (!match_entry(line, &host, &slots)) {
      fail(path, line_no,
           "Hostfile contains a bad entry: " + std::string(line) +
               ", unable to proceed with launching. Expected 'HOST slots=N' (e.g. 'worker-0 "
               "slots=8'); comment lines start with '#'.");
    }
    if (slots > kMaxSlots) fail(path, line_no, "slots=" + std::to_string(slots) + " is too large");
    for (const auto& e : entries) {
      if (e.host == host) {
        fail(path, line_no,
             "Hostfile contains multiple entries for " + host +
                 ", unable to proceed with launching (first entry on line " +
                 std::to_string(e.line) + "). Merge them into one line.");
      }
    }
    entries.push_back({host, static_cast<int>(slots), line_no});
  }
  if (entries.empty()) {
    throw Error(ErrorKind::Launch,
                "hostfile " + path +
                    ": Hostfile is empty or not formatted correctly, unable to proceed with "
                    "launching. Add one 'HOST slots=N' line per node, or remove the file (or pass "
                    "a hostfile path that does not exist) to launch on this machine only.");
  }
  return entries;
}

std::optional<std::vector<HostfileEntry>> read_hostfile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error(ErrorKind::Io, "hostfile " + path + " exists but cannot be read: check its permissions");
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parse_hostfile(text.str(), path);
}

}  // namespace dsx::launcher
