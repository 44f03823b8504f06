// OMP_NUM_THREADS within what the machine can run. libgomp and OpenBLAS read it when they load,
// before main: 30000 made libgomp abort when it could not create the threads and 100000 crashed
// the process (issue 33). More threads than this process's CPUs only slow the CPU kernels down.
#pragma once

#include <optional>
#include <string>

namespace dsx::kernels::cpu {

// The value OMP_NUM_THREADS should have, or nullopt to keep it: `value` (the variable, or null
// when unset) clamped to `cpus` when it is a plain number above that. Lists ("4,2") are kept.
std::optional<std::string> clamped_omp_threads(const char* value, int cpus);

// Sets OMP_NUM_THREADS to the CPUs this process may use when it asks for more, says so on stderr,
// and executes the program again so that the libraries read the new value. Call it first thing
// in main; returns when there is nothing to do (or the program cannot be executed again).
void clamp_omp_threads(char** argv);

}  // namespace dsx::kernels::cpu
