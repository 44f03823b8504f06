// What one span costs: with tracing off (the price every run pays for the instrumentation) and
// on, beside the floor (an empty loop iteration) and a steady-clock read, in ns per span. For
// what that means for a step of the main job: run_trace_cost.sh multiplies by the spans a traced
// step records.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include "trace/recorder.h"
#include "trace/trace.h"

namespace {

using Clock = std::chrono::steady_clock;

// Best of 5 runs of `n` iterations, in ns per iteration.
double ns_per(size_t n, const std::function<void(size_t)>& body) {
  double best = 1e300;
  for (int run = 0; run < 5; ++run) {
    const auto t0 = Clock::now();
    body(n);
    best = std::min(best, std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / static_cast<double>(n));
  }
  return best;
}

}  // namespace

int main() {
  using namespace dsx::trace;
  constexpr size_t kOff = 20000000, kOn = 100000;
  Recorder& recorder = Recorder::instance();
  recorder.set_capacity(kOn);
  const double floor = ns_per(kOff, [](size_t n) {
    for (size_t i = 0; i < n; ++i) asm volatile("" ::: "memory");
  });
  const double clock = ns_per(kOff / 10, [](size_t n) {
    for (size_t i = 0; i < n; ++i) {
      auto t = Clock::now();
      asm volatile("" : : "r"(&t) : "memory");
    }
  });
  recorder.stop();
  const double off = ns_per(kOff, [](size_t n) {
    for (size_t i = 0; i < n; ++i) {
      Scope s("backward layer", 3, "layer");
      asm volatile("" ::: "memory");
    }
  });
  const double on = ns_per(kOn, [&](size_t n) {
    recorder.clear();
    recorder.start();
    for (size_t i = 0; i < n; ++i) {
      Scope s("backward layer", 3, "layer");
      asm volatile("" ::: "memory");
    }
    recorder.stop();
  });
  std::printf("| %-34s | %10s | %10s |\n", "one span", "ns", "vs floor");
  std::printf("|%s|%s|%s|\n", "------------------------------------", "------------", "------------");
  std::printf("| %-34s | %10.2f | %9.2fx |\n", "empty loop iteration (floor)", floor, 1.0);
  std::printf("| %-34s | %10.2f | %9.2fx |\n", "span, tracing off", off, off / floor);
  std::printf("| %-34s | %10.2f | %9.2fx |\n", "steady_clock::now()", clock, clock / floor);
  std::printf("| %-34s | %10.2f | %9.2fx |\n", "span, tracing on (name built, kept)", on, on / floor);
  return 0;
}
