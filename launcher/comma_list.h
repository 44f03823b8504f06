// Lists written as "a,b,c" (CUDA_VISIBLE_DEVICES, --bind_core_list): the items between the commas,
// empty ones included ("" is one empty item, "1,,2" has three), for the caller to judge.
#pragma once

#include <string>
#include <vector>

namespace dsx::launcher {

inline std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    items.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return items;
}

}  // namespace dsx::launcher
