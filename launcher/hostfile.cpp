// Hostfile parsing with DeepSpeed's grammar: the stripped line must match `^(\S+)\s+slots=(\d+)`.
#include "launcher/hostfile.h"

#include <sys/stat.h>

#include <algorithm>
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

// Matches `^(\S+)\s+slots=(\d+)` on an already stripped line. `digits` gets the slot count as
// written; `tail` what follows it up to the next blank (empty for a whole number).
bool match_entry(std::string_view line, std::string* host, std::string_view* digits, std::string_view* tail) {
  size_t i = 0;
  while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
  if (i == 0 || i == line.size()) return false;
  *host = std::string(line.substr(0, i));
  while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
  std::string_view rest = line.substr(i);
  if (rest.substr(0, 6) != "slots=") return false;
  rest.remove_prefix(6);
  size_t n = 0;
  while (n < rest.size() && std::isdigit(static_cast<unsigned char>(rest[n]))) ++n;
  if (n == 0) return false;
  *digits = rest.substr(0, n);
  size_t t = n;
  while (t < rest.size() && !std::isspace(static_cast<unsigned char>(rest[t]))) ++t;
  *tail = rest.substr(n, t - n);
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
  if (text.substr(0, 3) == "\xEF\xBB\xBF") pos = 3;  // a UTF-8 byte order mark (editors on Windows add one)
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = strip(text.substr(pos, end - pos));
    ++line_no;
    pos = end + 1;
    if (line.empty() || line.front() == '#') continue;
    std::string host;
    std::string_view digits, tail;
    if (!match_entry(line, &host, &digits, &tail)) {
      fail(path, line_no,
           "Hostfile contains a bad entry: " + std::string(line) +
               ", unable to proceed with launching. Expected 'HOST slots=N' (e.g. 'worker-0 "
               "slots=8'); comment lines start with '#'.");
    }
    const std::string written = std::string(digits) + std::string(tail);
    if (!tail.empty()) {
      fail(path, line_no, "slots=" + written + " is not a whole number; write the number of ranks of " + host +
                              " as digits only (e.g. 'slots=2')");
    }
    digits.remove_prefix(std::min(digits.find_first_not_of('0'), digits.size() - 1));  // leading zeros
    if (digits.size() > 6 || std::stol(std::string(digits)) > kMaxSlots) {
      fail(path, line_no, "slots=" + written + " is too large (at most " + std::to_string(kMaxSlots) + ")");
    }
    const long slots = std::stol(std::string(digits));
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
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  if (S_ISDIR(st.st_mode)) {
    throw Error(ErrorKind::Launch, "hostfile " + path +
                                       " is a directory; -H/--hostfile must name a hostfile ('HOST slots=N' lines), "
                                       "or a path that does not exist to launch on this machine only");
  }
  if (!S_ISREG(st.st_mode)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error(ErrorKind::Io, "hostfile " + path + " exists but cannot be read: check its permissions");
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parse_hostfile(text.str(), path);
}

}  // namespace dsx::launcher
