// The one exception type of dsx (DESIGN.md §4). Every library throws dsx::Error; the message says
// what is wrong, where (JSON path and line, hostfile line, rank and host, collective and peer) and
// what to do. The category lets callers react (a timeout is retried, a config error is reported).
// Header-only so that every folder may use it without an upward dependency.
#pragma once

#include <stdexcept>
#include <string>

namespace dsx {

enum class ErrorKind {
  Usage,       // bad command line
  Config,      // ds_config content: JSON syntax, types, ranges, contradictions
  Io,          // files: missing, unreadable, disk full, truncated
  Format,      // a file of a known format with bad content (checkpoint, safetensors, shard)
  Comm,        // a peer, a fabric endpoint, a collective
  Timeout,     // a wait that ran out of time
  Launch,      // hostfile, runner, remote process
  Unsupported, // asked for something this build or machine cannot do
  Numeric,     // training can not go on: loss scale at its minimum, NaN where none may be
  OutOfMemory, // an allocation beyond the memory a rank may hold (a GPU's, or --device_memory)
  Internal,    // a bug in dsx
};

inline const char* to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Usage: return "usage";
    case ErrorKind::Config: return "config";
    case ErrorKind::Io: return "io";
    case ErrorKind::Format: return "format";
    case ErrorKind::Comm: return "comm";
    case ErrorKind::Timeout: return "timeout";
    case ErrorKind::Launch: return "launch";
    case ErrorKind::Unsupported: return "unsupported";
    case ErrorKind::Numeric: return "numeric";
    case ErrorKind::OutOfMemory: return "out_of_memory";
    case ErrorKind::Internal: return "internal";
  }
  return "unknown";
}

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

}  // namespace dsx
