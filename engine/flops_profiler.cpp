// The measured peak and the profile summary (see flops_profiler.h).
#include "engine/flops_profiler.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <vector>

namespace dsx::engine {
namespace {

std::string with_unit(double value, const char* unit) {
  const char* prefixes[] = {"", " K", " M", " G", " T", " P"};
  int i = 0;
  while (value >= 1000 && i < 5) {
    value /= 1000;
    ++i;
  }
  char text[64];
  std::snprintf(text, sizeof text, "%.2f%s%s", value, prefixes[i], unit);
  return text;
}

std::string ms(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f ms", seconds * 1e3);
  return text;
}

}  // namespace

double measured_sgemm_flops_per_second() {
  const int n = 512;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), out(n * n);
  double best = 1e30;
  for (int i = 0; i < 4; ++i) {
    const auto start = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, out.data(), n);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return 2.0 * n * n * n / best;
}

std::string format_flops_profile(const FlopsProfile& p) {
  const double fwd = p.forward_flops * static_cast<double>(p.micro_batches);
  const double step_flops = fwd * (p.recompute ? 4 : 3);  // backward is twice the forward
  const double achieved = step_flops / p.iteration_seconds;
  std::ostringstream out;
  out << "\n-------------------------- DeepSpeed Flops Profiler --------------------------\n"
      << "Profile Summary at step " << p.step << ":\n"
      << "Notations:\ndata parallel size (dp_size), model parallel size(mp_size),\n"
      << "number of parameters (params), number of multiply-accumulate operations(MACs),\n"
      << "number of floating-point operations (flops), floating-point operations per second (FLOPS),\n"
      << "fwd latency (forward propagation latency), bwd latency (backward propagation latency),\n"
      << "step (weights update latency), iter latency (sum of fwd, bwd and step latency)\n\n"
      << "world size:                                                   " << p.ranks << "\n"
      << "data parallel size:                                           " << p.ranks << "\n"
      << "model parallel size:                                          1\n"
      << "batch size per GPU:                                           " << p.samples / p.ranks / p.micro_batches << "\n"
      << "params per GPU:                                               " << with_unit(double(p.params), "") << "\n"
      << "params of model = params per GPU * mp_size:                   " << with_unit(double(p.params), "") << "\n"
      << "fwd MACs per GPU:                                             " << with_unit(fwd / 2, "MACs") << "\n"
      << "fwd flops per GPU:                                            " << with_unit(fwd, "") << "\n"
      << "fwd flops of model = fwd flops per GPU * mp_size:             " << with_unit(fwd, "") << "\n"
      << "fwd latency:                                                  " << ms(p.forward_seconds) << "\n"
      << "fwd FLOPS per GPU = fwd flops per GPU / fwd latency:          " << with_unit(fwd / p.forward_seconds, "FLOPS") << "\n"
      << "bwd latency:                                                  " << ms(p.backward_seconds) << "\n"
      << "bwd FLOPS per GPU = 2 * fwd flops per GPU / bwd latency:      "
      << with_unit((p.recompute ? 3 : 2) * fwd / p.backward_seconds, "FLOPS") << "\n"
      << "fwd+bwd FLOPS per GPU = 3 * fwd flops per GPU / (fwd+bwd latency):   "
      << with_unit(step_flops / (p.forward_seconds + p.backward_seconds), "FLOPS") << "\n"
      << "step latency:                                                 " << ms(p.step_seconds) << "\n"
      << "iter latency:                                                 " << ms(p.iteration_seconds) << "\n"
      << "FLOPS per GPU = 3 * fwd flops per GPU / iter latency:         " << with_unit(achieved, "FLOPS") << "\n"
      << "samples/second:                                               " << with_unit(p.samples / p.iteration_seconds, "") << "\n"
      << "MFU (model FLOPs / measured SGEMM peak of this rank, "
      << with_unit(p.peak_flops_per_second, "FLOPS") << "): " << std::fixed;
  out.precision(1);
  out << 100.0 * achieved / p.peak_flops_per_second << "%\n"
      << "------------------------------------------------------------------------------\n";
  return out.str();
}

}  // namespace dsx::engine
