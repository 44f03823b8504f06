// Spans on a timeline, for `dsx train --profile` (docs/profiling.md). While no trace is being
// recorded a span costs one relaxed atomic load: the instrumented code runs as if it were not.
//
//   trace::Scope span("forward", "phase");           // this thread's track, until end of scope
//   trace::Scope layer("backward layer", l, "layer"); // "backward layer 3", named only when on
//   trace::span(track, "allreduce", begin, end, {{"bytes", 4096}});  // any track, any thread
//
// Tracks: each thread records on its own (named with name_this_thread); work that is not a
// thread's (a bucket on a communication stream) records on a named track from trace::track().
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dsx::trace {

using Clock = std::chrono::steady_clock;

namespace detail {
inline std::atomic<bool> recording{false};
}

// A training step is named as torch.profiler names it ("ProfilerStep#12", category
// "user_annotation"), so that viewers built for PyTorch traces (TensorBoard's PyTorch profiler
// plugin) find the steps in a dsx trace.
inline constexpr const char* kStepName = "ProfilerStep#";
inline constexpr const char* kStepCategory = "user_annotation";

// Is a trace being recorded now?
inline bool recording() { return detail::recording.load(std::memory_order_relaxed); }

// A value shown with a span (a number, or a string when `text` is set).
struct Arg {
  std::string key;
  double number = 0;
  std::string text;
  bool is_text = false;
  Arg(std::string k, double v) : key(std::move(k)), number(v) {}
  Arg(std::string k, std::string v) : key(std::move(k)), text(std::move(v)), is_text(true) {}
  Arg(std::string k, const char* v) : Arg(std::move(k), std::string(v)) {}
};
using Args = std::vector<Arg>;

// The calling thread's track is shown under `name` ("training", "comm progress", ...).
void name_this_thread(const std::string& name);
// A track of its own, for work no single thread does; the same name gives the same track.
int track(const std::string& name);

// Records a finished span (when recording; otherwise does nothing).
void span(int track, std::string name, const char* category, Clock::time_point begin, Clock::time_point end,
          Args args = {});
// On the calling thread's track.
void span(std::string name, const char* category, Clock::time_point begin, Clock::time_point end, Args args = {});

// A span from construction to destruction on the calling thread's track. While not recording,
// construction is one load and one store, destruction one test.
class Scope {
 public:
  Scope(const char* name, const char* category) {
    if (recording()) open_ = std::make_unique<Open>(name, category);
  }
  // "<name> <index>" ("<name><index>" when the name ends in '#'): built only while recording.
  Scope(const char* name, int index, const char* category) {
    if (!recording()) return;
    std::string full(name);
    if (full.empty() || full.back() != '#') full += ' ';
    open_ = std::make_unique<Open>(full + std::to_string(index), category);
  }
  ~Scope() {
    if (open_) span(std::move(open_->name), open_->category, open_->begin, Clock::now(), std::move(open_->args));
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  // Shown with the span (ignored while not recording).
  void add(Arg arg) {
    if (open_) open_->args.push_back(std::move(arg));
  }

 private:
  struct Open {
    Open(std::string n, const char* c) : name(std::move(n)), category(c), begin(Clock::now()) {}
    std::string name;
    const char* category;
    Clock::time_point begin;
    Args args;
  };
  std::unique_ptr<Open> open_;  // null while not recording
};

}  // namespace dsx::trace
