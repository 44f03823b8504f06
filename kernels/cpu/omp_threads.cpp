// Clamping OMP_NUM_THREADS (see omp_threads.h).
#include "kernels/cpu/omp_threads.h"

#include <sched.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <iostream>

namespace dsx::kernels::cpu {

std::optional<std::string> clamped_omp_threads(const char* value, int cpus) {
  if (!value || cpus < 1) return std::nullopt;
  const char* end = value + std::strlen(value);
  long long n = 0;
  auto [rest, ec] = std::from_chars(value, end, n);
  const bool number = ec == std::errc() && rest == end;
  const bool too_many = number ? n > cpus : ec == std::errc::result_out_of_range;
  if (!too_many) return std::nullopt;
  return std::to_string(cpus);
}

void clamp_omp_threads(char** argv) {
  const char* value = std::getenv("OMP_NUM_THREADS");
  cpu_set_t set;
  const int cpus = ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  const auto clamped = clamped_omp_threads(value, cpus);
  if (!clamped) return;
  std::cerr << "dsx: note: OMP_NUM_THREADS=" << value << " is more than the " << cpus
            << " CPUs this process may use; running with " << *clamped << "\n";
  ::setenv("OMP_NUM_THREADS", clamped->c_str(), 1);
  ::execv("/proc/self/exe", argv);
}

}  // namespace dsx::kernels::cpu
