// Chrome trace event JSON (see chrome_trace.h). Complete events ("ph":"X") with microsecond
// times, and metadata events naming each process and thread.
#include "trace/chrome_trace.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "dsx/error.h"

namespace dsx::trace {

namespace {

void append_escaped(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

void append_number(std::string& out, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  out += buf;
}

void append_args(std::string& out, const Args& args) {
  out += "\"args\":{";
  for (size_t i = 0; i < args.size(); ++i) {
    if (i) out += ',';
    append_escaped(out, args[i].key);
    out += ':';
    if (args[i].is_text) {
      append_escaped(out, args[i].text);
    } else {
      append_number(out, args[i].number);
    }
  }
  out += '}';
}

void append_metadata(std::string& out, const char* what, int pid, int tid, const std::string& name) {
  out += "{\"ph\":\"M\",\"name\":\"";
  out += what;
  out += "\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) + ",\"args\":{\"name\":";
  append_escaped(out, name);
  out += "}},\n";
}

}  // namespace

std::string chrome_trace_json(const std::vector<Event>& events, const std::vector<Track>& tracks,
                              const TraceFileInfo& info) {
  std::string out = "{\"traceEvents\":[\n";
  append_metadata(out, "process_name", info.rank, 0, "rank " + std::to_string(info.rank));
  out += "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + std::to_string(info.rank) +
         ",\"tid\":0,\"args\":{\"sort_index\":" + std::to_string(info.rank) + "}},\n";
  for (const Track& t : tracks) {
    append_metadata(out, "thread_name", info.rank, t.id, t.name);
    out += "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":" + std::to_string(info.rank) +
           ",\"tid\":" + std::to_string(t.id) + ",\"args\":{\"sort_index\":" + std::to_string(t.id) + "}},\n";
  }
  for (const Event& e : events) {
    out += "{\"ph\":\"X\",\"name\":";
    append_escaped(out, e.name);
    out += ",\"cat\":";
    append_escaped(out, e.category);
    out += ",\"pid\":" + std::to_string(info.rank) + ",\"tid\":" + std::to_string(e.track) + ",\"ts\":";
    append_number(out, static_cast<double>(e.begin_ns - info.origin_ns) / 1000.0);
    out += ",\"dur\":";
    append_number(out, static_cast<double>(std::max<int64_t>(0, e.end_ns - e.begin_ns)) / 1000.0);
    out += ',';
    append_args(out, e.args);
    out += "},\n";
  }
  out += "{\"ph\":\"M\",\"name\":\"dsx_trace\",\"pid\":" + std::to_string(info.rank) + ",\"tid\":0,\"args\":{";
  out += "\"rank\":" + std::to_string(info.rank) + ",\"world_size\":" + std::to_string(info.world_size) +
         ",\"clock_offset_us\":";
  append_number(out, info.clock_offset_us);
  out += ",\"clock_uncertainty_us\":";
  append_number(out, info.clock_uncertainty_us);
  out += ",\"dropped_spans\":" + std::to_string(info.dropped) + "}}\n";
  out += "],\"displayTimeUnit\":\"ms\"}\n";
  return out;
}

void write_chrome_trace(const std::string& path, const std::vector<Event>& events, const std::vector<Track>& tracks,
                        const TraceFileInfo& info) {
  const std::string text = chrome_trace_json(events, tracks, info);
  const std::string partial = path + ".partial";
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
    if (!out) {
      std::remove(partial.c_str());
      throw Error(ErrorKind::Io, "cannot write the trace " + partial + ": " + std::strerror(errno) +
                                     " (is the --profile directory writable, and the disk not full?)");
    }
  }
  if (std::rename(partial.c_str(), path.c_str()) != 0) {
    throw Error(ErrorKind::Io, "cannot rename " + partial + " to " + path + ": " + std::strerror(errno));
  }
}

}  // namespace dsx::trace
