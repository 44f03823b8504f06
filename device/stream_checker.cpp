// The stream-order checker (see stream_checker.h).
#include "device/stream_checker.h"

#include <cxxabi.h>
#include <execinfo.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "dsx/error.h"

namespace dsx::device {
namespace {

constexpr int kStackDepth = 16;
constexpr int kFramesShown = 8;

uint64_t tick_of(const StreamChecker::Clock& clock, int actor) {
  const auto i = static_cast<size_t>(actor);
  return i < clock.size() ? clock[i] : 0;
}

// "module(mangled+0x1f) [0x...]" -> "demangled+0x1f (module)"; the raw line when it won't parse.
std::string readable_frame(const char* line) {
  std::string s = line;
  const size_t open = s.find('('), plus = s.find('+', open), close = s.find(')', open);
  if (open == std::string::npos || plus == std::string::npos || close == std::string::npos ||
      plus == open + 1) {
    return s;
  }
  const std::string mangled = s.substr(open + 1, plus - open - 1);
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> name(
      abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), &std::free);
  const std::string function = status == 0 && name ? name.get() : mangled;
  return function + s.substr(plus, close - plus) + " (" + s.substr(0, open) + ")";
}

}  // namespace

int StreamChecker::add_actor(const std::string& name) {
  std::lock_guard lock(mutex_);
  names_.push_back(name);
  clocks_.emplace_back(names_.size(), 0);
  return static_cast<int>(names_.size()) - 1;
}

StreamChecker::Site StreamChecker::site_here(int actor, const char* what) const {
  Site site;
  site.actor = actor;
  site.tick = tick_of(clocks_[static_cast<size_t>(actor)], actor);
  site.what = what;
  site.stack.resize(kStackDepth);
  site.stack.resize(static_cast<size_t>(backtrace(site.stack.data(), kStackDepth)));
  return site;
}

bool StreamChecker::ordered(int actor, const Site& earlier) const {
  return earlier.actor == actor ||
         tick_of(clocks_[static_cast<size_t>(actor)], earlier.actor) >= earlier.tick;
}

void StreamChecker::split_at(uintptr_t at) {
  auto it = ranges_.upper_bound(at);
  if (it == ranges_.begin()) return;
  --it;
  if (it->first < at && at < it->second.end) {
    RangeState upper = it->second;
    it->second.end = at;
    ranges_.emplace(at, std::move(upper));
  }
}

void StreamChecker::absorb_host(int actor) {
  if (actor == kHost) return;
  Clock& clock = clocks_[static_cast<size_t>(actor)];
  const Clock& host = clocks_[kHost];
  if (clock.size() < host.size()) clock.resize(host.size(), 0);
  for (size_t i = 0; i < host.size(); ++i) clock[i] = std::max(clock[i], host[i]);
}

void StreamChecker::access(int actor, std::span<const Touch> touches, const char* what) {
  std::lock_guard lock(mutex_);
  absorb_host(actor);
  Clock& clock = clocks_[static_cast<size_t>(actor)];
  if (clock.size() <= static_cast<size_t>(actor)) clock.resize(static_cast<size_t>(actor) + 1, 0);
  ++clock[static_cast<size_t>(actor)];
  const Site now = site_here(actor, what);
  for (const Touch& t : touches) {
    if (t.bytes == 0 || t.data == nullptr) continue;
    const auto begin = reinterpret_cast<uintptr_t>(t.data);
    const uintptr_t end = begin + t.bytes;
    split_at(begin);
    split_at(end);
    uintptr_t pos = begin;
    auto it = ranges_.lower_bound(begin);
    while (pos < end) {
      if (it == ranges_.end() || it->first != pos) {
        const uintptr_t gap_end = (it != ranges_.end() && it->first < end) ? it->first : end;
        RangeState fresh;
        fresh.end = gap_end;
        it = ranges_.emplace_hint(it, pos, std::move(fresh));
      }
      RangeState& r = it->second;
      if (r.written && !ordered(actor, r.write))
        report(now, t.access, r.write, Access::Write, it->first, r.end);
      if (t.access == Access::Write) {
        for (const Site& read : r.reads) {
          if (!ordered(actor, read)) report(now, t.access, read, Access::Read, it->first, r.end);
        }
        r.written = true;
        r.write = now;
        r.reads.clear();
      } else {
        bool replaced = false;
        for (Site& read : r.reads) {
          if (read.actor == actor) {
            read = now;
            replaced = true;
          }
        }
        if (!replaced) r.reads.push_back(now);
      }
      pos = r.end;
      ++it;
    }
  }
}

StreamChecker::Clock StreamChecker::snapshot(int actor) {
  std::lock_guard lock(mutex_);
  absorb_host(actor);
  return clocks_[static_cast<size_t>(actor)];
}

void StreamChecker::merge(int actor, const Clock& other) {
  std::lock_guard lock(mutex_);
  Clock& clock = clocks_[static_cast<size_t>(actor)];
  if (clock.size() < other.size()) clock.resize(other.size(), 0);
  for (size_t i = 0; i < other.size(); ++i) clock[i] = std::max(clock[i], other[i]);
}

void StreamChecker::forget(const void* data, size_t bytes) {
  if (bytes == 0 || data == nullptr) return;
  std::lock_guard lock(mutex_);
  const auto begin = reinterpret_cast<uintptr_t>(data);
  split_at(begin);
  split_at(begin + bytes);
  ranges_.erase(ranges_.lower_bound(begin), ranges_.lower_bound(begin + bytes));
}

std::string StreamChecker::describe(const Site& site) const {
  std::string out = std::string(site.what) + " on " + names_[static_cast<size_t>(site.actor)];
  char** symbols = backtrace_symbols(site.stack.data(), static_cast<int>(site.stack.size()));
  if (!symbols) return out;
  // Skip the checker's own frames (site_here, access) and the device call that asked.
  int shown = 0;
  for (size_t i = 2; i < site.stack.size() && shown < kFramesShown; ++i, ++shown) {
    out += "\n      at " + readable_frame(symbols[i]);
  }
  std::free(symbols);
  return out;
}

void StreamChecker::report(const Site& now, Access now_access, const Site& earlier,
                           Access earlier_access, uintptr_t begin, uintptr_t end) const {
  char range[96];
  std::snprintf(range, sizeof range, "bytes [0x%llx, 0x%llx)",
                static_cast<unsigned long long>(begin), static_cast<unsigned long long>(end));
  const char* verb = now_access == Access::Write ? "writes" : "reads";
  const char* earlier_verb = earlier_access == Access::Write ? "written" : "read";
  throw Error(
      ErrorKind::Internal,
      std::string("stream-order violation: ") + verb + " " + range +
          " not ordered after they were " + earlier_verb +
          " on another stream (no event wait or synchronize between the two).\n  now:     " +
          describe(now) + "\n  earlier: " + describe(earlier) +
          "\n  Record an event after the earlier access and wait for it before the later one.");
}

}  // namespace dsx::device
