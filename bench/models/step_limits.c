/* The limits beside a training step's phases, on the calling thread (run it with
 * OPENBLAS_NUM_THREADS=1 for a one-thread rank): how long one cblas_sgemm (the BLAS dsx's CPU
 * kernels call) takes at each shape given, and how fast one memcpy of a large buffer runs.
 * The machine may be shared: each call is timed alone and the fastest of at least 5 calls (and
 * 0.5 s) is kept, so time the thread spent descheduled does not count as the kernel's.
 * Built with -DSTEP_LIMITS_BF16 (and -ldnnl) it also times oneDNN's bf16 x bf16 -> fp32 matmul
 * (the primitive dsx's bf16 GEMMs call, kernels/cpu/gemm_bf16.cpp), the limit of a bf16 step.
 * Reads lines from stdin, prints one line each:
 *   "sgemm name transA transB M N K count" (N or T; count: calls per step)
 *       -> "name seconds_per_call gflops count"
 *   "bf16gemm name transA transB M N K count" -> the same, for the bf16 matmul
 *   "memcpy bytes" -> "memcpy seconds_per_copy gb_per_s_copied 0" */
#define _POSIX_C_SOURCE 199309L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef STEP_LIMITS_BF16
#include <oneapi/dnnl/dnnl.h>
#include <stdint.h>
#endif

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

#ifdef STEP_LIMITS_BF16
#define DNNL_OK(call)                                     \
  do {                                                    \
    if ((call) != dnnl_success) {                         \
      fprintf(stderr, "step_limits: %s failed\n", #call); \
      exit(3);                                            \
    }                                                     \
  } while (0)

/* A row-major (rows, cols) matrix, or its transpose when trans is 'T' (as cblas reads it). */
static dnnl_memory_desc_t matrix(int rows, int cols, char trans, dnnl_data_type_t type) {
  dnnl_memory_desc_t md;
  const dnnl_dims_t dims = {rows, cols};
  const dnnl_dims_t row_major = {cols, 1}, col_major = {1, rows};
  DNNL_OK(
      dnnl_memory_desc_init_by_strides(&md, 2, dims, type, trans == 'N' ? row_major : col_major));
  return md;
}

static uint16_t* filled_bf16(long n) {
  float* f = filled(n);
  uint16_t* p = malloc((size_t)n * sizeof(uint16_t));
  for (long i = 0; i < n; ++i) {
    uint32_t bits;
    memcpy(&bits, &f[i], sizeof bits);
    p[i] = (uint16_t)(bits >> 16); /* truncation: the values only feed the timing */
  }
  free(f);
  return p;
}

/* The primitive is built once per shape, as dsx caches it; each timed call is one execute. */
static double fastest_bf16gemm(char ta, char tb, int m, int n, int k) {
  dnnl_engine_t engine;
  dnnl_stream_t stream;
  DNNL_OK(dnnl_engine_create(&engine, dnnl_cpu, 0));
  DNNL_OK(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
  dnnl_memory_desc_t a_md = matrix(ta == 'N' ? m : k, ta == 'N' ? k : m, 'N', dnnl_bf16);
  dnnl_memory_desc_t b_md = matrix(tb == 'N' ? k : n, tb == 'N' ? n : k, 'N', dnnl_bf16);
  if (ta == 'T') a_md = matrix(m, k, 'T', dnnl_bf16);
  if (tb == 'T') b_md = matrix(k, n, 'T', dnnl_bf16);
  dnnl_memory_desc_t c_md = matrix(m, n, 'N', dnnl_f32);
  dnnl_matmul_desc_t desc;
  dnnl_primitive_desc_t pd;
  dnnl_primitive_t matmul;
  DNNL_OK(dnnl_matmul_desc_init(&desc, &a_md, &b_md, NULL, &c_md));
  DNNL_OK(dnnl_primitive_desc_create(&pd, &desc, NULL, engine, NULL));
  DNNL_OK(dnnl_primitive_create(&matmul, pd));
  uint16_t *a = filled_bf16((long)m * k), *b = filled_bf16((long)k * n);
  float* c = filled((long)m * n);
  dnnl_memory_t am, bm, cm;
  DNNL_OK(dnnl_memory_create(&am, &a_md, engine, a));
  DNNL_OK(dnnl_memory_create(&bm, &b_md, engine, b));
  DNNL_OK(dnnl_memory_create(&cm, &c_md, engine, c));
  const dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}};
  double best = 1e30, start = now();
  for (int calls = 0; calls < 5 || now() - start < 0.5; ++calls) {
    const double t0 = now();
    DNNL_OK(dnnl_primitive_execute(matmul, stream, 3, args));
    DNNL_OK(dnnl_stream_wait(stream));
    const double t = now() - t0;
    if (t < best) best = t;
  }
  dnnl_memory_destroy(am), dnnl_memory_destroy(bm), dnnl_memory_destroy(cm);
  dnnl_primitive_destroy(matmul), dnnl_primitive_desc_destroy(pd);
  dnnl_stream_destroy(stream), dnnl_engine_destroy(engine);
  free(a), free(b), free(c);
  return best;
}
#endif

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
    } else if ((strcmp(kind, "sgemm") == 0 || strcmp(kind, "bf16gemm") == 0) &&
               scanf("%127s %c %c %d %d %d %ld", name, &ta, &tb, &m, &n, &k, &count) == 7) {
#ifdef STEP_LIMITS_BF16
      const double s =
          kind[0] == 'b' ? fastest_bf16gemm(ta, tb, m, n, k) : fastest_sgemm(ta, tb, m, n, k);
#else
      if (kind[0] == 'b') {
        fprintf(stderr,
                "step_limits: built without STEP_LIMITS_BF16, so it cannot time bf16gemm\n");
        return 2;
      }
      const double s = fastest_sgemm(ta, tb, m, n, k);
#endif
      printf("%s %.9f %.2f %ld\n", name, s, 2.0 * m * n * k / s / 1e9, count);
    } else {
      fprintf(stderr, "step_limits: unreadable input line starting \"%s\"\n", kind);
      return 2;
    }
    fflush(stdout);
  }
  return 0;
}
