// The tied classifier's three SGEMMs at the GPT-2 CPU benchmark's shape (1024 tokens, 384
// channels, 50304 padded vocabulary) through dsx's CPU GEMM (kernels/cpu/gemm.h: OpenMP slices over
// a single-threaded OpenBLAS), best of --repeat. Prints one JSON line per product for
// run_classifier_gemm.sh, which puts them beside torch.mm on the same threads.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/cpu/blas_kernels.h"
#include "kernels/cpu/gemm.h"

namespace kc = dsx::kernels::cpu;

int main(int argc, char** argv) {
  kc::run_on_the_best_blas_kernels(argv);  // as dsx itself does
  const int repeat = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  const size_t N = 1024, C = 384, V = 50304;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto random = [&](size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = normal(rng);
    return v;
  };
  auto x = random(N * C), w = random(V * C), g = random(N * V);
  std::vector<float> logits(N * V), dx(N * C), dw(V * C, 0.0f);
  struct Product {
    const char* name;
    bool ta, tb;
    size_t m, n, k;
    const float *a, *b;
    float* c;
    size_t lda, ldb, ldc;
  };
  const Product products[] = {
      {"logits = x @ wte^T", false, true, N, V, C, x.data(), w.data(), logits.data(), C, C, V},
      {"dx = dlogits @ wte", false, false, N, C, V, g.data(), w.data(), dx.data(), V, C, C},
      {"dwte = dlogits^T @ x", true, false, V, C, N, g.data(), x.data(), dw.data(), V, C, C},
  };
  for (const Product& p : products) {
    double best = 1e30;
    for (int r = 0; r < repeat; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      kc::gemm(p.ta, p.tb, p.m, p.n, p.k, 1.0f, p.a, p.lda, p.b, p.ldb, 0.0f, p.c, p.ldc);
      best = std::min(best,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf(
        "{\"impl\": \"dsx\", \"product\": \"%s\", \"s\": %.5f, \"gflops\": %.1f, \"blas\": \"%s\", "
        "\"threads\": %d}\n",
        p.name, best, 2.0 * p.m * p.n * p.k / best / 1e9, kc::blas_description(),
        omp_get_max_threads());
  }
  return 0;
}
