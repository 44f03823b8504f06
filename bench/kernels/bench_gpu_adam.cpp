// GPU AdamW step of dsx on 1e9 parameters beside a device-to-device copy of the same footprint,
// measured in the same run with CUDA events. Prints one markdown table. Traffic per parameter:
// 28 bytes (read p, g, m, v; write p, m, v), 30 with the bf16 copy-out; the copy moves 2 x bytes.
//   bench_gpu_adam [params (default 1e9)] [reps (default 20)]
// Run by tests/gpu/run.sh.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cuda/mixed_precision.h"
#include "kernels/cuda/optimizers.h"

namespace {

namespace kn = dsx::kernels;

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "bench_gpu_adam: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// Median milliseconds of `reps` launches of f on `stream`, each timed by its own event pair.
template <class F>
double median_ms(cudaStream_t stream, int reps, F&& f) {
  f();
  ok(cudaStreamSynchronize(stream), "warm-up");
  std::vector<double> ms;
  cudaEvent_t a, b;
  ok(cudaEventCreate(&a), "event");
  ok(cudaEventCreate(&b), "event");
  for (int r = 0; r < reps; ++r) {
    ok(cudaEventRecord(a, stream), "record");
    f();
    ok(cudaEventRecord(b, stream), "record");
    ok(cudaEventSynchronize(b), "sync");
    float t = 0;
    ok(cudaEventElapsedTime(&t, a, b), "elapsed");
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  size_t n = argc > 1 ? size_t(std::strtod(argv[1], nullptr)) : size_t(1e9);
  int reps = argc > 2 ? std::atoi(argv[2]) : 20;
  cudaDeviceProp prop{};
  ok(cudaGetDeviceProperties(&prop, 0), "no CUDA device");
  cudaStream_t stream;
  ok(cudaStreamCreate(&stream), "stream");

  float *p, *g, *m, *v;
  uint16_t* p16;
  // One allocation p | g | m | v, so the baseline can copy (p, g) onto (m, v) in one call.
  ok(cudaMalloc(reinterpret_cast<void**>(&p), 4 * n * 4), "cudaMalloc p, g, m, v");
  g = p + n;
  m = p + 2 * n;
  v = p + 3 * n;
  ok(cudaMalloc(reinterpret_cast<void**>(&p16), n * 2), "cudaMalloc p16");
  // 0x3c3c3c3c = 0.0115f: finite, positive, the same in every buffer; the speed does not depend on
  // values.
  for (float* b : {p, g, m, v}) ok(cudaMemsetAsync(b, 0x3c, n * 4, stream), "memset");

  // Baseline: a device-to-device copy of 2 x 4n bytes (p,g -> m,v), reads + writes counted.
  double copy_ms = median_ms(stream, reps, [&] {
    ok(cudaMemcpyAsync(m, p, 2 * n * 4, cudaMemcpyDeviceToDevice, stream), "copy");
  });
  double copy_gbps = 2.0 * 2 * n * 4 / copy_ms / 1e6;
  ok(cudaMemsetAsync(m, 0, n * 4, stream), "memset");
  ok(cudaMemsetAsync(v, 0, n * 4, stream), "memset");

  kn::AdamHyper h;
  h.weight_decay = 0.01f;
  int64_t step = 0;
  std::printf(
      "GPU AdamW step on %s, %.2g params, median of %d. GB/s counts 28 B/param (30 with bf16 "
      "copy-out).\n\n",
      prop.name, double(n), reps);
  std::printf("| kernel | ms | GB/s | D2D copy GB/s | kernel / copy |\n|---|---|---|---|---|\n");
  for (bool bf16 : {false, true}) {
    kn::ParamCopy copy;
    if (bf16) copy = {kn::DType::BF16, p16};
    double ms = median_ms(
        stream, reps, [&] { kn::cuda::adam_step(h, ++step, 1.0f, p, g, m, v, n, copy, stream); });
    double gbps = (bf16 ? 30.0 : 28.0) * double(n) / ms / 1e6;
    std::printf("| adamw%s | %.2f | %.0f | %.0f | %.0f%% |\n", bf16 ? " + bf16 copy" : "", ms, gbps,
                copy_gbps, 100 * gbps / copy_gbps);
  }
  // Two helpers of the same step: the fp16 overflow check and the global-norm sum of squares.
  int* flag;
  double *sum, *work;
  ok(cudaMalloc(reinterpret_cast<void**>(&flag), sizeof(int)), "cudaMalloc");
  ok(cudaMalloc(reinterpret_cast<void**>(&sum), sizeof(double)), "cudaMalloc");
  ok(cudaMalloc(reinterpret_cast<void**>(&work), kn::cuda::sum_of_squares_workspace_bytes()),
     "cudaMalloc");
  double ms = median_ms(
      stream, reps, [&] { kn::cuda::unscale_and_check(kn::DType::F32, g, 1.0f, n, flag, stream); });
  std::printf("| unscale_and_check fp32 | %.2f | %.0f | %.0f | %.0f%% |\n", ms, 8.0 * n / ms / 1e6,
              copy_gbps, 100 * 8.0 * n / ms / 1e6 / copy_gbps);
  ms = median_ms(stream, reps,
                 [&] { kn::cuda::sum_of_squares(kn::DType::F32, g, n, sum, work, stream); });
  std::printf("| sum_of_squares fp32 (read only) | %.2f | %.0f | %.0f | %.0f%% |\n", ms,
              4.0 * n / ms / 1e6, copy_gbps, 100 * 4.0 * n / ms / 1e6 / copy_gbps);
  for (void* b : {(void*)p, (void*)p16, (void*)flag, (void*)sum, (void*)work}) cudaFree(b);
  cudaStreamDestroy(stream);
  return 0;
}
