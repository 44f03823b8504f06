// Printing and running a plan. Execution forks the CLI directly (no shell), captures stdout when
// the step asks for it, and kills a call that runs past its timeout.
#include "cloud/plan.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>

#include "dsx/error.h"
#include "dsx/shell_quote.h"

namespace dsx::cloud {

namespace {

// A word cut into literal text and ${NAME} references.
struct Segment {
  bool is_var;
  std::string text;  // literal text, or the variable name
};

std::vector<Segment> split_vars(const std::string& word) {
  std::vector<Segment> segments;
  size_t pos = 0;
  while (pos < word.size()) {
    size_t open = word.find("${", pos);
    size_t close = open == std::string::npos ? open : word.find('}', open);
    if (close == std::string::npos) {
      segments.push_back({false, word.substr(pos)});
      break;
    }
    if (open > pos) segments.push_back({false, word.substr(pos, open - pos)});
    segments.push_back({true, word.substr(open + 2, close - open - 2)});
    pos = close + 1;
  }
  return segments;
}

bool is_whole_var(const std::vector<Segment>& segments) {
  return segments.size() == 1 && segments[0].is_var;
}

// Text printed by `aws --output text` for a missing value counts as empty.
bool empty_value(const Vars& vars, const std::string& name) {
  auto it = vars.find(name);
  return it == vars.end() || it->second.empty() || it->second == "None";
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// A list variable stays unquoted so that the shell splits it into words, as execution does.
std::string print_word(const std::string& word, const std::vector<std::string>& lists) {
  auto segments = split_vars(word);
  if (is_whole_var(segments) && contains(lists, segments[0].text))
    return "${" + segments[0].text + "}";
  std::string out;
  for (const auto& s : segments) {
    if (s.is_var) {
      out += "\"${" + s.text + "}\"";
    } else if (s.text.find('$') != std::string::npos) {
      // Double quotes with escapes, so that no reader takes '$Latest' for a forgotten expansion.
      out += '"';
      for (char c : s.text) {
        if (c == '$' || c == '`' || c == '"' || c == '\\') out += '\\';
        out += c;
      }
      out += '"';
    } else {
      out += shell_quote(s.text);
    }
  }
  return out;
}

std::string trim(std::string s) {
  size_t end = s.find_last_not_of(" \t\r\n");
  s.erase(end == std::string::npos ? 0 : end + 1);
  size_t begin = s.find_first_not_of(" \t\r\n");
  return begin == std::string::npos ? "" : s.substr(begin);
}

// The messages a stopped step gives. The printed script gives the same ones: print_plan calls
// these with shell variables for the values only known when it runs (see wait_function).
std::string call_failed_message(const std::string& what, const std::string& program,
                                const std::string& code) {
  return "step '" + what + "' failed: " + program + " exited with " + code +
         " (its message is above)";
}

std::string wait_failed_message(const std::string& what, const std::string& state) {
  return "step '" + what + "': the cloud reports " + state +
         "; see why in its console, then run down and up again";
}

std::string wait_timeout_message(const std::string& what, const std::string& state,
                                 const std::string& timeout_s, const std::string& until) {
  return "step '" + what + "': still '" + state + "' after " + timeout_s + " s, not '" + until +
         "'; check it in the cloud's console, then run up again or down";
}

bool is_fail_state(const Step& step, const std::string& state) {
  return std::find(step.fail_states.begin(), step.fail_states.end(), state) !=
         step.fail_states.end();
}

// Where each tool a plan runs comes from, for the message when it is missing.
std::string package_of(const std::string& tool) {
  if (tool == "aws") return "the AWS CLI (Debian package awscli)";
  if (tool == "gcloud") return "the Google Cloud CLI (cloud.google.com/sdk)";
  if (tool == "ssh-keygen") return "OpenSSH (Debian package openssh-client)";
  return tool;
}

struct RunResult {
  int exit_code = -1;
  std::string out;
};

// Runs argv without a shell. Stdout is captured when `capture`, else passed through.
RunResult run_argv(const std::vector<std::string>& argv, bool capture, int timeout_s) {
  int pipe_fd[2] = {-1, -1};
  if (capture && pipe2(pipe_fd, O_CLOEXEC) != 0) {
    throw Error(ErrorKind::Internal, std::string("pipe: ") + std::strerror(errno));
  }
  pid_t pid = fork();
  if (pid < 0) throw Error(ErrorKind::Internal, std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    if (capture) dup2(pipe_fd[1], STDOUT_FILENO);
    std::vector<char*> args;
    args.reserve(argv.size() + 1);
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  RunResult result;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  if (capture) close(pipe_fd[1]);
  bool timed_out = false;
  while (capture && !timed_out) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{pipe_fd[0], POLLIN, 0};
    int ready = left.count() > 0 ? poll(&p, 1, int(left.count())) : 0;
    if (ready == 0) {
      timed_out = true;
      break;
    }
    if (ready < 0 && errno == EINTR) continue;
    char buffer[4096];
    ssize_t n = read(pipe_fd[0], buffer, sizeof buffer);
    if (n <= 0) break;
    result.out.append(buffer, size_t(n));
  }
  if (capture) close(pipe_fd[0]);
  int status = 0;
  while (!timed_out) {
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    timed_out = std::chrono::steady_clock::now() >= deadline;
    if (!timed_out) usleep(50 * 1000);
  }
  if (timed_out) {
    // Ask first, then insist; reap the child either way so that no process is left behind.
    kill(pid, SIGTERM);
    bool reaped = false;
    for (int i = 0; i < 40 && !reaped; ++i) {
      reaped = waitpid(pid, &status, WNOHANG) == pid;
      if (!reaped) usleep(50 * 1000);
    }
    if (!reaped) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
    throw Error(ErrorKind::Timeout, "'" + argv[0] + " " + (argv.size() > 1 ? argv[1] : "") +
                                        "' did not finish within " + std::to_string(timeout_s) +
                                        " s and was stopped; check the network and retry");
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

void fill_file(const Step& step, const Vars& vars) {
  std::ifstream in(step.fill_from, std::ios::binary);
  if (!in) throw Error(ErrorKind::Io, "cannot read " + step.fill_from + ": run render first");
  std::stringstream text;
  text << in.rdbuf();
  std::ofstream out(step.fill_to, std::ios::binary | std::ios::trunc);
  out << fill_vars(text.str(), vars);
  if (!out.flush()) throw Error(ErrorKind::Io, "cannot write " + step.fill_to);
}

}  // namespace

std::string fill_vars(const std::string& text, const Vars& vars) {
  std::string out;
  for (const auto& s : split_vars(text)) {
    auto it = s.is_var ? vars.find(s.text) : vars.end();
    if (!s.is_var) {
      out += s.text;
    } else if (it != vars.end()) {
      out += it->second;
    } else {
      out += "${" + s.text + "}";
    }
  }
  return out;
}

std::vector<std::string> list_captures(const Plan& plan) {
  std::vector<std::string> names;
  for (const auto& step : plan.steps) {
    if (step.capture_is_list) names.push_back(step.capture);
  }
  return names;
}

std::vector<std::string> resolve_argv(const Step& step, const Vars& vars,
                                      const std::vector<std::string>& lists) {
  std::vector<std::string> words;
  for (const auto& word : step.argv) {
    auto segments = split_vars(word);
    for (const auto& s : segments) {
      if (s.is_var && !vars.count(s.text)) {
        throw Error(ErrorKind::Internal, "step '" + step.what + "' uses ${" + s.text +
                                             "}, which no earlier step captured");
      }
    }
    if (is_whole_var(segments) && contains(lists, segments[0].text)) {
      std::istringstream items(empty_value(vars, segments[0].text) ? ""
                                                                   : vars.at(segments[0].text));
      for (std::string item; items >> item;) words.push_back(item);
    } else {
      words.push_back(fill_vars(word, vars));
    }
  }
  return words;
}

namespace {

// The sed (or cp) line that fills step.fill_to from step.fill_from with the shell's variables.
std::string fill_line(const Step& step) {
  std::ifstream in(step.fill_from);
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::string> names;
  std::string expressions;
  for (const auto& s : split_vars(text.str())) {
    if (s.is_var && std::find(names.begin(), names.end(), s.text) == names.end()) {
      names.push_back(s.text);
      expressions += " -e \"s|\\${" + s.text + "}|${" + s.text + "}|g\"";
    }
  }
  // Nothing left to fill (every value was known at render time): a copy. A bare `sed FILE`
  // would read the file's name as its script.
  return (names.empty() ? "cp" : "sed" + expressions) + " " + shell_quote(step.fill_from) +
         (names.empty() ? " " : " > ") + shell_quote(step.fill_to);
}

std::string command_line(const Step& step, const std::vector<std::string>& lists) {
  std::string line;
  for (size_t i = 0; i < step.argv.size(); ++i)
    line += (i ? " " : "") + print_word(step.argv[i], lists);
  return line;
}

// `text` as a double-quoted bash word in which each "@name@" of `vars` becomes ${name}.
std::string bash_template(const std::string& text, const std::vector<std::string>& vars) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '$' || c == '`' || c == '"' || c == '\\') out += '\\';
    out += c;
  }
  for (const auto& name : vars) {
    for (size_t at; (at = out.find("@" + name + "@")) != std::string::npos;)
      out.replace(at, name.size() + 2, "${" + name + "}");
  }
  return out + "\"";
}

// The wait loop of execute_plan (run_step) in bash, printed once above the steps that use it.
std::string wait_function() {
  auto message = [](const std::string& text) {
    return "echo " +
           bash_template("error: " + text,
                         {"what", "program", "code", "state", "timeout_s", "until"}) +
           " >&2; exit 1; }";
  };
  return "\n# dsx_wait WHAT UNTIL FAIL_STATES TIMEOUT_S POLL_S COMMAND...: the wait dsx runs: the\n"
         "# command every POLL_S seconds (DSX_CLOUD_POLL_S overrides it) until it prints UNTIL; a\n"
         "# failed call, a state of FAIL_STATES or the end of TIMEOUT_S stops the script at once.\n"
         "dsx_wait() {\n"
         "  local what=$1 until=$2 fail_states=$3 timeout_s=$4 poll_s=${DSX_CLOUD_POLL_S:-$5}\n"
         "  shift 5\n"
         "  local program=$1 deadline=$((SECONDS + timeout_s)) state code\n"
         "  while true; do\n"
         "    code=0\n"
         "    state=$(\"$@\") || code=$?\n"
         "    state=${state#\"${state%%[![:space:]]*}\"}\n"
         "    state=${state%\"${state##*[![:space:]]}\"}\n"
         "    ((code == 0)) || { " +
         message(call_failed_message("@what@", "@program@", "@code@")) +
         "\n"
         "    [[ $state == \"$until\" ]] && return 0\n"
         "    [[ -z $state || \" $fail_states \" != *\" $state \"* ]] || { " +
         message(wait_failed_message("@what@", "@state@")) +
         "\n"
         "    ((deadline - SECONDS > poll_s)) || { " +
         message(wait_timeout_message("@what@", "@state@", "@timeout_s@", "@until@")) +
         "\n"
         "    sleep \"$poll_s\"\n"
         "  done\n"
         "}\n";
}

std::string join_words(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

// A polling step: one call of dsx_wait with the step's description of its wait.
void print_wait(std::ostream& out, const Step& step, const std::string& indent,
                const std::string& command) {
  out << indent << "dsx_wait " << shell_quote(step.what) << " " << shell_quote(step.until) << " "
      << shell_quote(join_words(step.fail_states)) << " " << step.timeout_s << " " << step.poll_s
      << " " << command << "\n";
}

// A check the script makes itself: the call must succeed (and print `expect`), else it stops.
void print_refusal(std::ostream& out, const Step& step, const std::string& indent,
                   const std::string& command) {
  out << indent << "if ! ";
  if (step.capture.empty()) {
    out << command << " >/dev/null";
  } else {
    out << step.capture << "=$(" << command << ")";
    if (!step.expect.empty())
      out << " || [[ \"${" << step.capture << "}\" != " << shell_quote(step.expect) << " ]]";
  }
  out << "; then\n"
      << indent << "  echo " << shell_quote("error: " + step.refusal) << " >&2\n"
      << indent << "  exit 1\n"
      << indent << "fi\n";
}

// Every ${NAME} the plan's words refer to.
std::vector<std::string> used_names(const Plan& plan) {
  std::vector<std::string> names;
  for (const auto& step : plan.steps) {
    for (const auto& word : step.argv) {
      for (const auto& s : split_vars(word)) {
        if (s.is_var) names.push_back(s.text);
      }
    }
    if (!step.skip_if_empty.empty()) names.push_back(step.skip_if_empty);
    if (!step.fill_from.empty()) {
      std::ifstream in(step.fill_from);
      std::stringstream text;
      text << in.rdbuf();
      for (const auto& s : split_vars(text.str())) {
        if (s.is_var) names.push_back(s.text);
      }
    }
  }
  return names;
}

void print_step(std::ostream& out, const Step& step, const std::vector<std::string>& lists,
                const std::vector<std::string>& used) {
  out << "\n# " << step.what << "\n";
  std::string indent;
  if (!step.skip_if_empty.empty()) {
    const std::string v = "${" + step.skip_if_empty + "}";
    out << "if [[ -n \"" << v << "\" && \"" << v << "\" != None ]]; then\n";
    indent = "  ";
  }
  if (!step.fill_from.empty()) out << indent << fill_line(step) << "\n";
  bool splits = false;
  for (const auto& word : step.argv) splits = splits || print_word(word, lists).find("${") == 0;
  if (splits) out << indent << "# shellcheck disable=SC2086  # one word per item\n";
  const std::string command = command_line(step, lists);
  // A refusal's capture is used by its own test of `expect`.
  if (!step.capture.empty() && !contains(used, step.capture) && step.expect.empty()) {
    out << indent << "# shellcheck disable=SC2034  # for dsx's check, not a later call\n";
  }
  if (!step.until.empty()) {
    print_wait(out, step, indent, command);
  } else if (!step.refusal.empty()) {
    print_refusal(out, step, indent, command);
  } else {
    out << indent << (step.capture.empty() ? "" : step.capture + "=$(") << command
        << (step.capture.empty() ? "" : ")") << (step.quiet ? " >/dev/null" : "")
        << (step.may_fail ? " || true" : "") << "\n";
  }
  if (!step.check_what.empty()) out << indent << "# dsx then checks: " << step.check_what << "\n";
  if (!indent.empty()) out << "fi\n";
}

}  // namespace

void print_plan(std::ostream& out, const Plan& plan) {
  const auto lists = list_captures(plan);
  out << "#!/bin/bash\n# " << plan.title
      << "\n# Printed by dsx --dry-run; each step is one CLI call.\n"
      << "set -euo pipefail\n";
  const auto used = used_names(plan);
  if (std::any_of(plan.steps.begin(), plan.steps.end(),
                  [](const Step& step) { return !step.until.empty(); }))
    out << wait_function();
  for (const auto& step : plan.steps) print_step(out, step, lists, used);
}

namespace {

// The step's call, once, or (with `until`) until it prints the wanted value or time runs out.
RunResult run_step(const Step& step, const std::vector<std::string>& argv) {
  const bool capture = !step.capture.empty() || step.quiet || !step.until.empty();
  if (step.until.empty()) return run_argv(argv, capture, step.timeout_s);
  const char* poll_env = std::getenv("DSX_CLOUD_POLL_S");
  const int poll_s = poll_env ? std::max(0, std::atoi(poll_env)) : step.poll_s;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(step.timeout_s);
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::seconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    auto result = run_argv(argv, true, int(std::max<long>(1, std::min<long>(left, 120))));
    const std::string state = trim(result.out);
    if (result.exit_code != 0 || state == step.until) return result;
    if (!state.empty() && is_fail_state(step, state))
      throw Error(ErrorKind::Launch, wait_failed_message(step.what, state));
    if (left <= poll_s) {
      throw Error(
          ErrorKind::Timeout,
          wait_timeout_message(step.what, state, std::to_string(step.timeout_s), step.until));
    }
    std::this_thread::sleep_for(std::chrono::seconds(poll_s));
  }
}

}  // namespace

Vars execute_plan(const Plan& plan, std::ostream& log, Vars vars) {
  const auto lists = list_captures(plan);
  for (const auto& step : plan.steps) {
    if (!step.skip_if_empty.empty() && empty_value(vars, step.skip_if_empty)) {
      log << "-- skipped (nothing to do): " << step.what << "\n";
      continue;
    }
    log << "-- " << step.what << "\n" << std::flush;
    if (!step.fill_from.empty()) fill_file(step, vars);
    auto argv = resolve_argv(step, vars, lists);
    auto result = run_step(step, argv);
    if (result.exit_code == 127) {
      throw Error(ErrorKind::Unsupported, "'" + argv[0] + "' was not found on PATH: install " +
                                              package_of(argv[0]) +
                                              " (or use --dry-run to print the commands)");
    }
    if (!step.refusal.empty() &&
        (result.exit_code != 0 || (!step.expect.empty() && trim(result.out) != step.expect))) {
      throw Error(ErrorKind::Config, step.refusal);
    }
    if (result.exit_code != 0 && !step.may_fail) {
      throw Error(ErrorKind::Launch,
                  call_failed_message(step.what, argv[0], std::to_string(result.exit_code)));
    }
    if (result.exit_code != 0) {
      log << "   (failed with exit code " << result.exit_code << "; continuing)\n";
    } else if (!step.capture.empty()) {
      vars[step.capture] = trim(result.out);
      if (vars[step.capture] == "None") vars[step.capture].clear();
    }
    if (step.check) step.check(vars);
  }
  return vars;
}

}  // namespace dsx::cloud
