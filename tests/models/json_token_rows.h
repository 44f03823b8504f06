// The token rows of a batch file ({"inputs": [[...]], "targets": [[...]]}, as the compat scripts
// write them), flattened row after row: what the CPU model tests and llama_dump feed a model.
#pragma once

#include <rapidjson/document.h>

#include <cstdint>
#include <vector>

namespace dsx::test {

inline std::vector<int32_t> rows_of(const rapidjson::Value& rows) {
  std::vector<int32_t> out;
  for (const auto& row : rows.GetArray())
    for (const auto& v : row.GetArray()) out.push_back(v.GetInt());
  return out;
}

}  // namespace dsx::test
