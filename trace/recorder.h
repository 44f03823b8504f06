// The process's recorder of spans (trace.h is the side that records; this is the side that
// starts, stops and reads): a bounded list of finished spans and the names of their tracks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "trace/trace.h"

namespace dsx::trace {

struct Event {
  std::string name;
  const char* category = "";
  int track = 0;
  int64_t begin_ns = 0;  // steady clock
  int64_t end_ns = 0;
  Args args;
};

struct Track {
  int id = 0;
  std::string name;
};

class Recorder {
 public:
  static Recorder& instance();

  // At most `max_events` spans are kept; later ones are counted as dropped, never grown into.
  void set_capacity(size_t max_events);
  void start();
  void stop();
  void clear();  // forgets the spans recorded so far (a warm-up's), keeps the tracks

  std::vector<Event> events() const;
  std::vector<Track> tracks() const;
  size_t dropped() const;

  // Used by trace.h's functions.
  void add(Event event);
  int thread_track();
  void name_track(int id, const std::string& name);
  int named_track(const std::string& name);

 private:
  Recorder() = default;
  int new_track(std::string name);  // with mutex_ held

  mutable std::mutex mutex_;
  std::vector<Event> events_;
  std::vector<Track> tracks_;
  size_t capacity_ = 200000;
  size_t dropped_ = 0;
};

}  // namespace dsx::trace
