/* The limits beside a training step's phases, on the calling thread (run it with
 * OPENBLAS_NUM_THREADS=1 for a one-thread rank): how long one cblas_sgemm (the BLAS dsx's CPU
 * kernels call) takes at each shape given, and how fast one memcpy of a large buffer runs.
 * The machine may be shared: each call is timed alone and the fastest of at least 5 calls (and
 * 0.5 s) is kept, so time the thread spent descheduled does not count as the kernel's.
 * Reads lines from stdin, prints one line each:
 *   "sgemm name transA transB M N K count" (N or T; count: calls per step)
 *       -> "name seconds_per_call gflops count"
 *   "memcpy bytes" -> "memcpy seconds_per_copy gb_per_s_copied 0" */
#define _POSIX_C_SOURCE 199309L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float* filled(long n) {
  float* p = malloc((size_t)n * sizeof(float));
  for (long i = 0; i < n; ++i) p[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
  return p;
}

static double fastest_sgemm(char ta, char tb, int m, int n, int k) {
  float *a = filled((long)m * k), *b = filled((long)k * n), *c = filled((long)m * n);
  const int lda = ta == 'N' ? k : m, ldb = tb == 'N' ? n : k;
  double best = 1e30, start = now();
  for (int calls = 0; calls < 5 || now() - start < 0.5; ++calls) {
    const double t0 = now();
    cblas_sgemm(CblasRowMajor, ta == 'N' ? CblasNoTrans : CblasTrans, tb == 'N' ? CblasNoTrans : CblasTrans,
                m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
    const double t = now() - t0;
    if (t < best) best = t;
  }
  free(a);
  free(b);
  free(c);
  return best;
}

static double fastest_memcpy(long bytes) {
  char *src = malloc((size_t)bytes), *dst = malloc((size_t)bytes);
  memset(src, 1, (size_t)bytes);
  memset(dst, 2, (size_t)bytes);
  double best = 1e30, start = now();
  for (int copies = 0; copies < 5 || now() - start < 0.5; ++copies) {
    const double t0 = now();
    memcpy(dst, src, (size_t)bytes);
    __asm__ volatile("" ::: "memory"); /* keep every copy */
    const double t = now() - t0;
    if (t < best) best = t;
  }
  free(src);
  free(dst);
  return best;
}

int main(void) {
  char kind[16], name[128], ta, tb;
  int m, n, k;
  long count, bytes;
  while (scanf("%15s", kind) == 1) {
    if (strcmp(kind, "memcpy") == 0 && scanf("%ld", &bytes) == 1) {
      const double s = fastest_memcpy(bytes);
      printf("memcpy %.9f %.3f 0\n", s, (double)bytes / s / 1e9);
    } else if (strcmp(kind, "sgemm") == 0 && scanf("%127s %c %c %d %d %d %ld", name, &ta, &tb, &m, &n, &k, &count) == 7) {
      const double s = fastest_sgemm(ta, tb, m, n, k);
      printf("%s %.9f %.2f %ld\n", name, s, 2.0 * m * n * k / s / 1e9, count);
    } else {
      fprintf(stderr, "step_limits: unreadable input line starting \"%s\"\n", kind);
      return 2;
    }
    fflush(stdout);
  }
  return 0;
}
