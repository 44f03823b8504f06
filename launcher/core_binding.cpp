// Core lists and their split over ranks.
#include "launcher/core_binding.h"

#include <sched.h>

#include <cctype>

#include "dsx/error.h"
#include "launcher/comma_list.h"

namespace dsx::launcher {
namespace {

[[noreturn]] void bad(const std::string& text, const std::string& why) {
  throw Error(ErrorKind::Usage, "--bind_core_list '" + text + "': " + why +
                                    " (expected ascending items like 1,3-5,7 without spaces)");
}

int parse_core(const std::string& text, const std::string& item) {
  if (item.empty() || item.size() > 6) bad(text, "'" + item + "' is not a core number");
  for (char c : item)
    if (!std::isdigit(static_cast<unsigned char>(c))) bad(text, "'" + item + "' is not a core number");
  return std::stoi(item);
}

}  // namespace

std::vector<int> parse_core_list(const std::string& text) {
  std::vector<int> cores;
  for (const std::string& item : split_commas(text)) {
    auto dash = item.find('-');
    int first = parse_core(text, item.substr(0, dash));
    int last = dash == std::string::npos ? first : parse_core(text, item.substr(dash + 1));
    if (last < first) bad(text, "range '" + item + "' runs backwards");
    if (!cores.empty() && first <= cores.back()) bad(text, "'" + item + "' overlaps or is not ascending");
    for (int c = first; c <= last; ++c) cores.push_back(c);
  }
  return cores;
}

std::vector<int> available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cores;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cores;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cores.push_back(c);
  return cores;
}

std::vector<int> cores_for_rank(const std::vector<int>& cores, int local_size, int index) {
  int per_rank = local_size > 0 ? static_cast<int>(cores.size()) / local_size : 0;
  if (per_rank < 1) {
    throw Error(ErrorKind::Usage, "cannot bind " + std::to_string(local_size) + " ranks to " +
                                      std::to_string(cores.size()) + " core(s): each rank needs at least one; "
                                      "give a longer --bind_core_list or fewer ranks");
  }
  return {cores.begin() + index * per_rank, cores.begin() + (index + 1) * per_rank};
}

}  // namespace dsx::launcher
