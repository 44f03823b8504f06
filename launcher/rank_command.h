// The command line of one rank, as DeepSpeed builds it: `python -u [-m] script
// [--local_rank=N] args...`, or the program itself with --no_python. dsx also runs a program
// directly when Python could not run it anyway: an ELF binary or a script whose #! line names
// another interpreter. The dsx binary itself reads LOCAL_RANK from the environment, so it gets
// no --local_rank argument.
#pragma once

#include <string>
#include <vector>

namespace dsx::launcher {

struct ProgramSpec {
  std::string script;
  std::vector<std::string> args;
  bool module = false;
  bool no_python = false;
  bool no_local_rank = false;
};

// The interpreter for Python scripts: $DSX_PYTHON, else python3 (then python) on PATH, made
// absolute like DeepSpeed's sys.executable so that every node runs the same one.
std::string find_python();

// `name` as the shell would find it: itself when it contains '/', else the first executable on
// PATH; "" when not found.
std::string resolve_program(const std::string& name);

// True when `script` is an ELF binary or a #! script for something other than Python.
bool runs_without_python(const std::string& script);

std::vector<std::string> rank_argv(const ProgramSpec& program, int local_rank, const std::string& python);

}  // namespace dsx::launcher
