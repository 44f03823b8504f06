// fork + exec of a supervised child.
#include "launcher/process.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "dsx/error.h"

namespace dsx::launcher {
namespace {

// Only async-signal-safe calls between fork and exec.
// `stream_files`: files for stdout and stderr (-1: the output pipe or log).
[[noreturn]] void exec_in_child(const SpawnSpec& spec, char* const* argv, char* const* envp, int out_fd,
                                const int* stream_files, int in_fd, int err_pipe, pid_t parent) {
  if (spec.own_process_group) ::setpgid(0, 0);
  // If the supervisor itself is killed (even by SIGKILL), its children get SIGTERM instead of
  // running on unsupervised.
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) ::_exit(128 + SIGTERM);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT}) ::signal(sig, SIG_DFL);
  ::dup2(in_fd, 0);
  ::dup2(stream_files[0] >= 0 ? stream_files[0] : out_fd, 1);
  ::dup2(stream_files[1] >= 0 ? stream_files[1] : out_fd, 2);
  if (!spec.cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : spec.cpus) CPU_SET(c, &set);
    if (::sched_setaffinity(0, sizeof set, &set) != 0) {
      int e = errno;
      (void)!::write(err_pipe, &e, sizeof e);
      ::_exit(127);
    }
  }
  ::execvpe(argv[0], argv, envp);
  int e = errno;
  (void)!::write(err_pipe, &e, sizeof e);
  ::_exit(127);
}

}  // namespace

std::vector<pid_t> descendants(pid_t root) {
  std::vector<std::pair<pid_t, pid_t>> parent_of;  // (pid, ppid)
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    auto paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(stat.substr(paren + 2));
    char state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    parent_of.emplace_back(std::stoi(name), ppid);
  }
  std::vector<pid_t> found = {root};
  for (size_t i = 0; i < found.size(); ++i) {
    for (const auto& [pid, ppid] : parent_of)
      if (ppid == found[i]) found.push_back(pid);
  }
  found.erase(found.begin());
  return found;
}

void signal_tree(pid_t leader, int sig) {
  auto below = descendants(leader);  // before the signal: orphans lose their parent link
  if (::getpgid(leader) != leader || ::killpg(leader, sig) != 0) ::kill(leader, sig);
  for (pid_t pid : below) ::kill(pid, sig);
}

Child spawn_child(const SpawnSpec& spec) {
  std::vector<char*> argv;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_text;
  for (const auto& [k, v] : spec.env) env_text.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);

  Child child;
  int out[2] = {-1, -1};
  if (!spec.log_path.empty()) {
    out[1] = ::open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (out[1] < 0) throw Error(ErrorKind::Io, "cannot open rank log " + spec.log_path + ": " + std::strerror(errno));
  } else if (::pipe2(out, O_CLOEXEC) != 0) {
    throw Error(ErrorKind::Launch, std::string("pipe: ") + std::strerror(errno));
  }
  int stream_files[2] = {-1, -1};  // torchrun's --redirects
  const std::string* stream_paths[2] = {&spec.stdout_path, &spec.stderr_path};
  for (int i = 0; i < 2; ++i) {
    if (stream_paths[i]->empty()) continue;
    stream_files[i] = ::open(stream_paths[i]->c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (stream_files[i] < 0) throw Error(ErrorKind::Io, "cannot open " + *stream_paths[i] + ": " + std::strerror(errno));
  }
  int err_out[2] = {-1, -1};  // torchrun's --tee of stderr alone
  if (spec.separate_stderr && stream_files[1] < 0) {
    if (::pipe2(err_out, O_CLOEXEC) != 0) throw Error(ErrorKind::Launch, std::string("pipe: ") + std::strerror(errno));
    stream_files[1] = err_out[1];
  }
  int in[2] = {-1, -1};
  if (spec.stdin_pipe) {
    if (::pipe2(in, O_CLOEXEC) != 0) throw Error(ErrorKind::Launch, std::string("pipe: ") + std::strerror(errno));
  } else {
    in[0] = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) throw Error(ErrorKind::Launch, std::string("pipe: ") + std::strerror(errno));

  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw Error(ErrorKind::Launch, std::string("fork: ") + std::strerror(errno));
  if (pid == 0) exec_in_child(spec, argv.data(), envp.data(), out[1], stream_files, in[0], err_pipe[1], parent);
  for (int f : stream_files)
    if (f >= 0) ::close(f);

  if (spec.own_process_group) ::setpgid(pid, pid);  // also here: killpg works before the child ran
  ::close(err_pipe[1]);
  ::close(out[1]);
  ::close(in[0]);
  int exec_errno = 0;
  ssize_t n;
  do {
    n = ::read(err_pipe[0], &exec_errno, sizeof exec_errno);
  } while (n < 0 && errno == EINTR);
  ::close(err_pipe[0]);
  if (n == sizeof exec_errno) {
    ::waitpid(pid, nullptr, 0);
    if (out[0] >= 0) ::close(out[0]);
    if (err_out[0] >= 0) ::close(err_out[0]);
    if (in[1] >= 0) ::close(in[1]);
    child.exec_errno = exec_errno;
    return child;
  }
  child.pid = pid;
  child.output_fd = out[0];
  child.error_fd = err_out[0];
  child.stdin_fd = in[1];
  if (in[1] >= 0 && !spec.stdin_text.empty()) {
    // Fits the pipe's buffer (64 KiB), so this returns at once whatever the child does.
    (void)!::write(in[1], spec.stdin_text.data(), spec.stdin_text.size());
  }
  return child;
}

}  // namespace dsx::launcher
