// Helpers for the ds_config tests: read a config from a string or from tests/config/configs/
// (whose leading "// world_size: N" style comments give the command-line inputs, the same ones
// tools/compat/ds_config_compat.py uses), look up an effective value, capture an error.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "dsx/error.h"
#include "config/ds_config.h"
#include "tests/expect_contains.h"

namespace dsx::test {

inline std::string case_path(const std::string& name) {
  return std::string(DSX_SOURCE_DIR) + "/tests/config/configs/" + name + ".json";
}

// The inputs a test config file asks for in its header comments ("// world_size: 4").
inline config::ConfigInputs inputs_of_file(const std::string& path) {
  config::ConfigInputs in;
  std::ifstream file(path);
  std::string line;
  while (std::getline(file, line) && line.rfind("//", 0) == 0) {
    std::istringstream words(line.substr(2));
    std::string key;
    long long value = 0;
    if (!(words >> key >> value)) continue;
    if (key == "world_size:") in.world_size = value;
    if (key == "hidden_size:") in.hidden_size = value;
    if (key == "micro_batch:") in.micro_batch = value;
    if (key == "grad_accum:") in.grad_accum = value;
    if (key == "warmup_steps:") in.warmup_steps = value;
    if (key == "total_steps:") in.total_steps = value;
  }
  return in;
}

inline config::EngineConfig read_case(const std::string& name) {
  return config::read_ds_config_file(case_path(name), inputs_of_file(case_path(name)));
}

inline config::EngineConfig read_text(const std::string& text, int64_t world_size = 1) {
  config::ConfigInputs in;
  in.world_size = world_size;
  return config::read_ds_config_text(text, "test.json", in);
}

// The error message reading produces; fails the test if reading succeeds or throws anything else.
template <class Read>
std::string error_of(Read read, ErrorKind kind = ErrorKind::Config) {
  try {
    read();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected an error, but the config was accepted";
  return {};
}

inline std::string case_error(const std::string& name) {
  return error_of([&] { read_case(name); });
}
inline std::string text_error(const std::string& text, int64_t world_size = 1) {
  return error_of([&] { read_text(text, world_size); });
}

// The effective value at a dotted path, as JSON text ("" when the path is not listed).
inline std::string value_at(const config::EngineConfig& c, const std::string& path) {
  for (const auto& e : config::flatten(c))
    if (e.path == path) return e.value;
  return {};
}

inline bool has_warning(const config::EngineConfig& c, const std::string& fragment) {
  for (const auto& w : c.warnings)
    if (w.message.find(fragment) != std::string::npos || w.path.find(fragment) != std::string::npos) return true;
  return false;
}

}  // namespace dsx::test
