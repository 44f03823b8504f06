// Helpers for launcher tests that start real processes: run `dsx launch` in the background with
// a known pid, wait for files, read and check a rank's recorded environment, find free ports.
#pragma once

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <chrono>
#include <functional>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace dsx::test {

using Clock = std::chrono::steady_clock;

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline bool exists(const std::string& path) { return std::filesystem::exists(path); }

// KEY=VALUE lines of an `env` dump (single-line values).
inline std::map<std::string, std::string> read_env(const std::string& path) {
  std::map<std::string, std::string> env;
  std::istringstream in(read_text(path));
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

// Checks each variable of `want` in a rank's environment `env` (an absent one reads as ""); a
// failure names `where` and the variable.
inline void expect_vars(const std::map<std::string, std::string>& env, const std::map<std::string, std::string>& want,
                        const std::string& where = "") {
  for (const auto& [name, value] : want) {
    const auto it = env.find(name);
    EXPECT_EQ(it == env.end() ? std::string() : it->second, value) << where << " " << name;
  }
}

// A TCP port nobody listens on right now (bound to port 0 and released).
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

inline bool wait_for(const std::function<bool()>& done, double seconds) {
  auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

// A temporary directory removed at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = testing::TempDir() + "/dsx_launch_XXXXXX";
    path_ = std::filesystem::canonical(::mkdtemp(tmpl.data())).string();  // as getcwd() spells it
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A process started with posix_spawn, output to a file, killed (whole group) if still running at
// the end of the test.
class Background {
 public:
  Background(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env, const std::string& output,
             const std::string& cwd = "") {
    std::vector<std::string> env_text;
    for (char** e = environ; *e; ++e) env_text.emplace_back(*e);
    for (const auto& e : extra_env) {
      auto name = e.substr(0, e.find('=') + 1);
      std::erase_if(env_text, [&](const std::string& x) { return x.rfind(name, 0) == 0; });
      env_text.push_back(e);
    }
    std::vector<char*> envp, args;
    for (auto& e : env_text) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<std::string> argv_copy = argv;
    for (auto& a : argv_copy) args.push_back(a.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    if (posix_spawnp(&pid_, args[0], &actions, &attr, args.data(), envp.data()) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  ~Background() {
    if (pid_ > 0 && !finished_) {
      ::killpg(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  void signal(int sig) { ::kill(pid_, sig); }

  // Exit code (128+N for signal N), or -1 on timeout.
  int wait(double seconds) {
    auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        finished_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  bool finished_ = false;
};

inline std::string probe_script() { return std::string(DSX_SOURCE_DIR) + "/tests/launcher/rank_probe.sh"; }

// True while `pid` runs (a zombie waiting to be reaped counts as gone).
inline bool process_alive(pid_t pid) {
  std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  auto paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

// The environment of process `pid` (empty once it is gone).
inline std::map<std::string, std::string> read_env_of(pid_t pid) {
  std::string text = read_text("/proc/" + std::to_string(pid) + "/environ");
  std::map<std::string, std::string> env;
  std::istringstream in(text);
  for (std::string entry; std::getline(in, entry, '\0');) {
    const auto eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return env;
}

// Live processes whose environment holds `marker` (e.g. DSX_TEST_OUT=<this test's dir>): what a
// launch left behind, grandchildren included.
inline std::vector<pid_t> processes_with_env(const std::string& marker) {
  std::vector<pid_t> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string env = read_text(entry.path().string() + "/environ");
    for (auto& c : env)
      if (c == '\0') c = '\n';
    if (("\n" + env).find("\n" + marker + "\n") != std::string::npos && process_alive(std::stoi(name))) found.push_back(std::stoi(name));
  }
  return found;
}

// Waits up to `seconds` for every process carrying `marker` to be gone; kills (by pid) and names
// the ones that stay.
inline void expect_nothing_left(const std::string& marker, double seconds = 10) {
  bool clean = wait_for([&] { return processes_with_env(marker).empty(); }, seconds);
  auto left = processes_with_env(marker);
  for (pid_t pid : left) ::kill(pid, SIGKILL);
  EXPECT_TRUE(clean) << left.size() << " process(es) of the launch left running, e.g. pid " << (left.empty() ? 0 : left[0]);
}

inline pid_t read_pid(const std::string& path) { return static_cast<pid_t>(std::atoi(read_text(path).c_str())); }

}  // namespace dsx::test
