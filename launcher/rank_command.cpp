// Building a rank's argv.
#include "launcher/rank_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>

namespace dsx::launcher {
namespace {

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string real_path(const std::string& path) {
  char buf[PATH_MAX];
  return ::realpath(path.c_str(), buf) ? std::string(buf) : path;
}

// This process's binary ("" when /proc does not say).
std::string self_executable() {
  char self[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  return n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string();
}

bool is_dsx_binary(const std::string& program) {
  std::string resolved = resolve_program(program);
  const std::string self = self_executable();
  if (resolved.empty() || self.empty()) return false;
  return real_path(resolved) == real_path(self);
}

}  // namespace

std::string resolve_program(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (is_executable_file(candidate)) return candidate;
    start = end + 1;
  }
  return "";
}

std::string find_python() {
  if (const char* p = std::getenv("DSX_PYTHON"); p && *p) return p;
  for (const char* name : {"python3", "python"}) {
    std::string found = resolve_program(name);
    if (!found.empty()) return found;
  }
  return "python3";
}

bool runs_without_python(const std::string& script) {
  std::string path = resolve_program(script);
  if (path.empty()) return false;
  std::ifstream in(path, std::ios::binary);
  char head[128] = {};
  in.read(head, sizeof head - 1);
  std::string first(head, static_cast<size_t>(in.gcount()));
  if (first.rfind("\x7f" "ELF", 0) == 0) return true;
  if (first.rfind("#!", 0) != 0) return false;
  std::string shebang = first.substr(0, first.find('\n'));
  return shebang.find("python") == std::string::npos;
}

std::vector<std::string> rank_argv(const ProgramSpec& p, int local_rank, const std::string& python) {
  std::vector<std::string> argv;
  // `dsx launch ... dsx train` from a build tree, with no dsx on PATH: the launcher's own binary.
  const std::string script = p.script == "dsx" && resolve_program("dsx").empty() ? self_executable() : p.script;
  bool direct = p.no_python || (!p.module && runs_without_python(script));
  if (!direct) {
    argv = {python, "-u"};
    if (p.module) argv.push_back("-m");
  }
  argv.push_back(script);
  bool dsx_itself = direct && is_dsx_binary(script);
  if (!p.no_local_rank && !dsx_itself) argv.push_back("--local_rank=" + std::to_string(local_rank));
  argv.insert(argv.end(), p.args.begin(), p.args.end());
  return argv;
}

}  // namespace dsx::launcher
