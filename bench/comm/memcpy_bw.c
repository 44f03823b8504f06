/* The physical limit beside `dsx bench comm` on one host: how fast one core copies a buffer of
 * each size (memcpy between two distinct buffers, repeated for at least 0.2 s). Ranks on one host
 * exchange data through memory, so an allreduce cannot move bytes faster than this.
 * Prints "bytes GB/s" per line. Usage: memcpy_bw MINBYTES MAXBYTES */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char** argv) {
  long min_bytes = argc > 1 ? atol(argv[1]) : 4096, max_bytes = argc > 2 ? atol(argv[2]) : 64 << 20;
  char* src = malloc((size_t)max_bytes);
  char* dst = malloc((size_t)max_bytes);
  memset(src, 1, (size_t)max_bytes);
  memset(dst, 2, (size_t)max_bytes);
  for (long bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    long reps = 0;
    double start = now(), elapsed;
    do {
      memcpy(dst, src, (size_t)bytes);
      __asm__ volatile("" ::: "memory"); /* keep every copy */
      ++reps;
      elapsed = now() - start;
    } while (elapsed < 0.2);
    printf("%ld %.3f\n", bytes, (double)bytes * (double)reps / elapsed / 1e9);
  }
  free(src);
  free(dst);
  return 0;
}
