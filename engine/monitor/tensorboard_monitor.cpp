// TensorBoardMonitor: protobuf wire format by hand (varints, fixed64 double, fixed32 float,
// length-delimited strings and messages) — three messages do not justify a protobuf dependency.
#include "engine/monitor/tensorboard_monitor.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "dsx/error.h"
#include "checkpoint/durable_file.h"
#include "engine/monitor/tfrecord.h"

namespace dsx::engine::monitor {
namespace {

// Field numbers of tensorboard/compat/proto/{event,summary}.proto.
constexpr int kEventWallTime = 1;     // double
constexpr int kEventStep = 2;         // int64
constexpr int kEventFileVersion = 3;  // string
constexpr int kEventSummary = 5;      // Summary
constexpr int kSummaryValue = 1;      // repeated Summary.Value
constexpr int kValueTag = 1;          // string
constexpr int kValueSimpleValue = 2;  // float

enum WireType { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_key(std::string& out, int field, WireType type) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | type);
}

template <typename T>
void put_fixed(std::string& out, int field, T value) {
  put_key(out, field, sizeof(T) == 8 ? kFixed64 : kFixed32);
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // little-endian hosts
  out.append(bytes, sizeof(T));
}

void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out += bytes;
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string encode_file_version_event(double wall_time) {
  std::string event;
  put_fixed(event, kEventWallTime, wall_time);
  put_bytes(event, kEventFileVersion, "brain.Event:2");
  return event;
}

std::string encode_scalar_event(const std::string& tag, float value, int64_t step,
                                double wall_time) {
  std::string summary_value;
  put_bytes(summary_value, kValueTag, tag);
  put_fixed(summary_value, kValueSimpleValue, value);
  std::string summary;
  put_bytes(summary, kSummaryValue, summary_value);
  std::string event;
  put_fixed(event, kEventWallTime, wall_time);
  put_key(event, kEventStep, kVarint);
  put_varint(event, static_cast<uint64_t>(step));  // negative steps: two's complement, as protobuf
  put_bytes(event, kEventSummary, summary);
  return event;
}

TensorBoardMonitor::TensorBoardMonitor(const std::string& output_path, const std::string& job_name)
    : log_dir_(monitor_log_dir(output_path, job_name)) {
  std::error_code ec;
  std::filesystem::create_directories(log_dir_, ec);
  if (ec)
    checkpoint::throw_io_error("tensorboard monitor could not create its directory", log_dir_,
                               ec.value());
  const double wall_time = now_seconds();
  char stamp[32];
  std::snprintf(stamp, sizeof stamp, "%010lld", static_cast<long long>(wall_time));
  const std::string base = log_dir_ + "/events.out.tfevents." + stamp + "." + host_name() + "." +
                           std::to_string(::getpid()) + ".";
  // The last number tells apart writers of one process within one second, as TensorBoard's does.
  for (int n = 0; !file_; ++n) {
    path_ = base + std::to_string(n);
    int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST && n < 1000) continue;
    if (fd < 0) checkpoint::throw_io_error("tensorboard monitor could not create", path_, errno);
    file_ = ::fdopen(fd, "wb");
    if (!file_) {
      int err = errno;
      ::close(fd);
      checkpoint::throw_io_error("tensorboard monitor could not open", path_, err);
    }
  }
  append(encode_file_version_event(wall_time));
  flush();
}

TensorBoardMonitor::~TensorBoardMonitor() {
  if (file_) std::fclose(file_);
}

void TensorBoardMonitor::append(const std::string& event_bytes) {
  std::string record;
  append_tfrecord(record, event_bytes);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size())
    checkpoint::throw_io_error("tensorboard monitor could not write", path_, errno);
}

void TensorBoardMonitor::write_events(std::span<const Event> events) {
  const double wall_time = now_seconds();
  for (const Event& e : events)
    append(encode_scalar_event(e.name, static_cast<float>(e.value), e.step, wall_time));
  flush();
}

void TensorBoardMonitor::flush() {
  if (std::fflush(file_) != 0)
    checkpoint::throw_io_error("tensorboard monitor could not write", path_, errno);
}

}  // namespace dsx::engine::monitor
