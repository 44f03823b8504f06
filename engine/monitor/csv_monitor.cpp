// CsvMonitor: DeepSpeed's deepspeed/monitor/csv_monitor.py, in C++.
#include "engine/monitor/csv_monitor.h"

#include <cerrno>
#include <filesystem>

#include "dsx/error.h"
#include "checkpoint/durable_file.h"
#include "engine/monitor/python_float.h"

namespace dsx::engine::monitor {
namespace {

// Python csv.writer's QUOTE_MINIMAL: quote a field holding the delimiter, a quote or a line break.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

std::string monitor_log_dir(const std::string& output_path, const std::string& job_name) {
  if (output_path.empty() || (!job_name.empty() && job_name[0] == '/')) return job_name;
  return output_path.back() == '/' ? output_path + job_name : output_path + "/" + job_name;
}

CsvMonitor::CsvMonitor(const std::string& output_path, const std::string& job_name)
    : log_dir_(monitor_log_dir(output_path, job_name)) {
  std::error_code ec;
  std::filesystem::create_directories(log_dir_, ec);
  if (ec)
    checkpoint::throw_io_error("csv_monitor could not create its directory", log_dir_, ec.value());
}

CsvMonitor::~CsvMonitor() {
  for (auto& [name, file] : files_) std::fclose(file);
}

std::string CsvMonitor::file_name(const std::string& event_name) {
  std::string name = event_name;
  for (char& c : name)
    if (c == '/' || c == ' ') c = '_';
  return name + ".csv";
}

std::FILE* CsvMonitor::file_for(const std::string& event_name) {
  const std::string name = file_name(event_name);
  auto it = files_.find(name);
  if (it != files_.end()) return it->second;
  const std::string path = log_dir_ + "/" + name;
  std::FILE* file = std::fopen(path.c_str(), "a");
  if (!file) checkpoint::throw_io_error("csv_monitor could not open", path, errno);
  files_[name] = file;
  std::string header = event_name.substr(
      event_name.find_last_of('/') == std::string::npos ? 0 : event_name.find_last_of('/') + 1);
  std::fprintf(file, "step,%s\r\n", csv_field(header).c_str());
  return file;
}

void CsvMonitor::write_events(std::span<const Event> events) {
  for (const Event& e : events) {
    std::FILE* file = file_for(e.name);
    if (std::fprintf(file, "%lld,%s\r\n", static_cast<long long>(e.step),
                     python_float_repr(e.value).c_str()) < 0)
      checkpoint::throw_io_error("csv_monitor could not write", log_dir_ + "/" + file_name(e.name),
                                 errno);
  }
  flush();
}

void CsvMonitor::flush() {
  for (auto& [name, file] : files_)
    if (std::fflush(file) != 0)
      checkpoint::throw_io_error("csv_monitor could not write", log_dir_ + "/" + name, errno);
}

}  // namespace dsx::engine::monitor
