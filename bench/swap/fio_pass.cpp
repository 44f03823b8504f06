// One fio pass and its JSON (see fio_pass.h).
#include "bench/swap/fio_pass.h"

#include <rapidjson/document.h>

#include <cstdio>
#include <stdexcept>

namespace dsx::bench {

std::string fio_command(const FioJob& job) {
  const size_t part = job.bytes / static_cast<size_t>(job.numjobs);
  // --fallocate=none: the bench reserved the file as it reserves dsx's; fio must not reserve it
  // again (or lay it out) before its timed pass.
  return "fio --name=dsx --filename=" + job.file + " --rw=" + job.rw +
         " --bs=" + std::to_string(job.bs) + " --size=" + std::to_string(part) +
         " --offset_increment=" + std::to_string(part) +
         " --direct=1 --ioengine=libaio --iodepth=" + std::to_string(job.iodepth) +
         " --numjobs=" + std::to_string(job.numjobs) +
         " --fallocate=none --group_reporting --output-format=json";
}

double fio_bandwidth(const FioJob& job) {
  const std::string command = fio_command(job);
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot start fio: " + command);
  std::string out;
  char chunk[4096];
  while (size_t n = std::fread(chunk, 1, sizeof chunk, pipe)) out.append(chunk, n);
  const int status = ::pclose(pipe);
  const size_t json = out.find('{');  // fio may print warnings first
  rapidjson::Document doc;
  if (json != std::string::npos) doc.Parse(out.c_str() + json);
  const bool ok = status == 0 && !doc.HasParseError() && doc.IsObject() && doc.HasMember("jobs") &&
                  doc["jobs"].IsArray() && !doc["jobs"].Empty() &&
                  doc["jobs"][0]["error"].GetInt() == 0;
  if (!ok) {
    throw std::runtime_error("fio failed (" + command + "): " + out.substr(0, 400) +
                             " -- install fio (tools/setup.sh does)");
  }
  return doc["jobs"][0][job.rw.c_str()]["bw_bytes"].GetDouble();
}

}  // namespace dsx::bench
