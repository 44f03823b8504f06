// The comms logger (see logging_communicator.h).
#include "comm/logging_communicator.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>

namespace dsx::comm {
namespace {

using Clock = std::chrono::steady_clock;

// nccl-tests' bus-bandwidth factors: what each rank must move per byte of the message.
double bus_factor(const std::string& op, int n) {
  if (n <= 1) return 1.0;
  if (op == "all_reduce") return 2.0 * (n - 1) / n;
  if (op == "reduce_scatter" || op == "all_gather") return double(n - 1) / n;
  return 1.0;
}

std::string size_text(size_t bytes) {
  char text[32];
  if (bytes >= (1u << 30)) {
    std::snprintf(text, sizeof text, "%.2f GB", bytes / double(1u << 30));
  } else if (bytes >= (1u << 20)) {
    std::snprintf(text, sizeof text, "%.2f MB", bytes / double(1u << 20));
  } else if (bytes >= 1024) {
    std::snprintf(text, sizeof text, "%.2f KB", bytes / 1024.0);
  } else {
    std::snprintf(text, sizeof text, "%zu B", bytes);
  }
  return text;
}

}  // namespace

LoggingCommunicator::LoggingCommunicator(Communicator& inner, std::vector<std::string> prof_ops, bool verbose)
    : inner_(inner), prof_ops_(std::move(prof_ops)), verbose_(verbose) {}

WorkHandle LoggingCommunicator::record(const std::string& op, size_t bytes, WorkHandle work, Clock::time_point issued) {
  if (!prof_ops_.empty() && std::find(prof_ops_.begin(), prof_ops_.end(), op) == prof_ops_.end()) return work;
  if (verbose_) std::cerr << "comm op: " << op << " | msg size: " << size_text(bytes) << "\n";
  std::lock_guard lock(mutex_);
  records_.push_back({op, bytes, issued, work});
  return work;
}

WorkHandle LoggingCommunicator::allreduce(void* data, size_t count, DType dtype, ReduceOp op) {
  const auto t = Clock::now();
  return record("all_reduce", count * kernels::dtype_size(dtype), inner_.allreduce(data, count, dtype, op), t);
}

WorkHandle LoggingCommunicator::reduce_scatter(const void* input, void* output, size_t count, DType dtype, ReduceOp op) {
  const auto t = Clock::now();
  return record("reduce_scatter", count * size() * kernels::dtype_size(dtype),
                inner_.reduce_scatter(input, output, count, dtype, op), t);
}

WorkHandle LoggingCommunicator::allgather(const void* input, void* output, size_t count, DType dtype) {
  const auto t = Clock::now();
  return record("all_gather", count * size() * kernels::dtype_size(dtype), inner_.allgather(input, output, count, dtype), t);
}

WorkHandle LoggingCommunicator::broadcast(void* data, size_t count, DType dtype, int root) {
  const auto t = Clock::now();
  return record("broadcast", count * kernels::dtype_size(dtype), inner_.broadcast(data, count, dtype, root), t);
}

WorkHandle LoggingCommunicator::barrier() {
  const auto t = Clock::now();
  return record("barrier", 0, inner_.barrier(), t);
}

WorkHandle LoggingCommunicator::send(const void* data, size_t count, DType dtype, int peer) {
  const auto t = Clock::now();
  return record("send", count * kernels::dtype_size(dtype), inner_.send(data, count, dtype, peer), t);
}

WorkHandle LoggingCommunicator::recv(void* data, size_t count, DType dtype, int peer) {
  const auto t = Clock::now();
  return record("recv", count * kernels::dtype_size(dtype), inner_.recv(data, count, dtype, peer), t);
}

void LoggingCommunicator::allreduce_on(device::Device& device, device::Stream& stream, void* data, size_t count,
                                       DType dtype, ReduceOp op) {
  inner_.allreduce_on(device, stream, data, count, dtype, op);
  record("all_reduce", count * kernels::dtype_size(dtype), nullptr, Clock::now());
}

void LoggingCommunicator::reduce_scatter_on(device::Device& device, device::Stream& stream, const void* input,
                                            void* output, size_t count, DType dtype, ReduceOp op) {
  inner_.reduce_scatter_on(device, stream, input, output, count, dtype, op);
  record("reduce_scatter", count * size() * kernels::dtype_size(dtype), nullptr, Clock::now());
}

void LoggingCommunicator::allgather_on(device::Device& device, device::Stream& stream, const void* input,
                                       void* output, size_t count, DType dtype) {
  inner_.allgather_on(device, stream, input, output, count, dtype);
  record("all_gather", count * size() * kernels::dtype_size(dtype), nullptr, Clock::now());
}

void LoggingCommunicator::send_on(device::Device& device, device::Stream& stream, const void* data, size_t count,
                                  DType dtype, int peer) {
  inner_.send_on(device, stream, data, count, dtype, peer);
  record("send", count * kernels::dtype_size(dtype), nullptr, Clock::now());
}

void LoggingCommunicator::recv_on(device::Device& device, device::Stream& stream, void* data, size_t count,
                                  DType dtype, int peer) {
  inner_.recv_on(device, stream, data, count, dtype, peer);
  record("recv", count * kernels::dtype_size(dtype), nullptr, Clock::now());
}

std::unique_ptr<Communicator> LoggingCommunicator::new_group(const std::vector<int>& ranks) {
  return inner_.new_group(ranks);
}

std::string LoggingCommunicator::summary() const {
  struct Row {
    size_t count = 0, timed = 0;
    double seconds = 0, algbw = 0, busbw = 0;
  };
  std::map<std::pair<std::string, size_t>, Row> rows;
  {
    std::lock_guard lock(mutex_);
    for (const Record& r : records_) {
      if (!r.work) {
        ++rows[{r.op, r.bytes}].count;
        continue;
      }
      if (!r.work->done()) continue;
      const double s = std::max(1e-9, std::chrono::duration<double>(r.work->finished_at() - r.issued).count());
      Row& row = rows[{r.op, r.bytes}];
      ++row.count;
      ++row.timed;
      row.seconds += s;
      row.algbw += r.bytes / s;
      row.busbw += r.bytes / s * bus_factor(r.op, size());
    }
  }
  std::ostringstream out;
  char line[160];
  std::snprintf(line, sizeof line, "%-16s %-14s %8s %18s %16s %16s %17s\n", "Comm. Op", "Message Size", "Count",
                "Total Latency(ms)", "Avg Latency(ms)", "tput_avg (Gbps)", "busbw_avg (Gbps)");
  out << line;
  std::string last;
  for (const auto& [key, row] : rows) {
    const std::string& op = key.first;
    if (row.timed == 0) {
      std::snprintf(line, sizeof line, "%-16s %-14s %8zu %18s %16s %16s %17s\n", op == last ? "" : op.c_str(),
                    size_text(key.second).c_str(), row.count, "-", "-", "-", "-");
    } else {
      std::snprintf(line, sizeof line, "%-16s %-14s %8zu %18.2f %16.3f %16.2f %17.2f\n",
                    op == last ? "" : op.c_str(), size_text(key.second).c_str(), row.count, row.seconds * 1e3,
                    row.seconds * 1e3 / row.timed, row.algbw / row.timed * 8 / 1e9,
                    row.busbw / row.timed * 8 / 1e9);
    }
    out << line;
    last = op;
  }
  return out.str();
}

}  // namespace dsx::comm
