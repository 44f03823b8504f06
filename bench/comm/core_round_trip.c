/* How far apart the two cores the ranks run on are: two processes pass a counter back and forth
 * through one shared cache line; prints the mean round trip in ns. On a VM the host may place the
 * two vCPUs on cores that share a cache (tens of ns) or on different dies (hundreds), and every
 * exchange between ranks pays it: run.sh prints it beside the table.
 * Usage: core_round_trip [ROUND_TRIPS] */
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char** argv) {
  long n = argc > 1 ? atol(argv[1]) : 200000;
  _Atomic uint64_t* line = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (line == MAP_FAILED) return 1;
  atomic_store(line, 0);
  pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    for (long i = 0; i < n; ++i) {
      while (atomic_load(line) != (uint64_t)(2 * i + 1)) _mm_pause();
      atomic_store(line, (uint64_t)(2 * i + 2));
    }
    _exit(0);
  }
  double start = now();
  for (long i = 0; i < n; ++i) {
    atomic_store(line, (uint64_t)(2 * i + 1));
    while (atomic_load(line) != (uint64_t)(2 * i + 2)) _mm_pause();
  }
  printf("%.0f\n", (now() - start) / (double)n * 1e9);
  waitpid(child, NULL, 0);
  return 0;
}
