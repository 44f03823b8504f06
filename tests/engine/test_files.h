// Small helpers the engine tests share: a file's bytes, and the message of the dsx::Error a call
// throws.
#pragma once

#include <fstream>
#include <iterator>
#include <string>

#include "dsx/error.h"

namespace dsx::test {

// The whole file ("" when it cannot be read).
inline std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The message of the dsx::Error `fn` throws, or "" when it throws none.
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const dsx::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace dsx::test
