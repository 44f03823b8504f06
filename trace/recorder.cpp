// The span recorder (see recorder.h and trace.h).
#include "trace/recorder.h"

namespace dsx::trace {

namespace {

int64_t nanoseconds(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

Recorder& Recorder::instance() {
  static Recorder recorder;
  return recorder;
}

void Recorder::set_capacity(size_t max_events) {
  std::lock_guard lock(mutex_);
  capacity_ = max_events;
}

void Recorder::start() { detail::recording.store(true, std::memory_order_relaxed); }
void Recorder::stop() { detail::recording.store(false, std::memory_order_relaxed); }

void Recorder::clear() {
  std::lock_guard lock(mutex_);
  events_.clear();
  dropped_ = 0;
}

std::vector<Event> Recorder::events() const {
  std::lock_guard lock(mutex_);
  return events_;
}

std::vector<Track> Recorder::tracks() const {
  std::lock_guard lock(mutex_);
  return tracks_;
}

size_t Recorder::dropped() const {
  std::lock_guard lock(mutex_);
  return dropped_;
}

void Recorder::add(Event event) {
  std::lock_guard lock(mutex_);
  if (events_.size() >= capacity_) {
    ++dropped_;
    return;
  }
  events_.push_back(std::move(event));
}

int Recorder::new_track(std::string name) {
  const int id = static_cast<int>(tracks_.size()) + 1;  // tid 0 reads as "no thread" in some viewers
  tracks_.push_back({id, std::move(name)});
  return id;
}

int Recorder::thread_track() {
  thread_local int id = 0;
  if (id == 0) {
    std::lock_guard lock(mutex_);
    id = new_track("thread " + std::to_string(tracks_.size() + 1));
  }
  return id;
}

void Recorder::name_track(int id, const std::string& name) {
  std::lock_guard lock(mutex_);
  for (Track& t : tracks_) {
    if (t.id == id) t.name = name;
  }
}

int Recorder::named_track(const std::string& name) {
  std::lock_guard lock(mutex_);
  for (const Track& t : tracks_) {
    if (t.name == name) return t.id;
  }
  return new_track(name);
}

void name_this_thread(const std::string& name) {
  Recorder& r = Recorder::instance();
  r.name_track(r.thread_track(), name);
}

int track(const std::string& name) { return Recorder::instance().named_track(name); }

void span(int track, std::string name, const char* category, Clock::time_point begin, Clock::time_point end,
          Args args) {
  if (!recording()) return;
  Recorder::instance().add({std::move(name), category, track, nanoseconds(begin), nanoseconds(end), std::move(args)});
}

void span(std::string name, const char* category, Clock::time_point begin, Clock::time_point end, Args args) {
  if (!recording()) return;
  Recorder& r = Recorder::instance();
  r.add({std::move(name), category, r.thread_track(), nanoseconds(begin), nanoseconds(end), std::move(args)});
}

}  // namespace dsx::trace
