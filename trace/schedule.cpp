// torch.profiler's schedule (see schedule.h).
#include "trace/schedule.h"

#include <algorithm>
#include <charconv>
#include <vector>

#include "dsx/error.h"

namespace dsx::trace {

ProfileSchedule parse_profile_schedule(std::string_view text, const std::string& flag) {
  std::vector<int64_t> values;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view part = text.substr(at, comma - at);
    int64_t v = -1;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size() || v < 0 || v > 1000000) {
      throw Error(ErrorKind::Usage, flag + " '" + std::string(text) + "': '" + std::string(part) +
                                        "' is not a whole number of steps from 0 to 1000000; "
                                        "write wait,warmup,active[,repeat], e.g. 1,1,3 or 5,1,3,2");
    }
    values.push_back(v);
    at = comma + 1;
  }
  if (values.size() < 3 || values.size() > 4) {
    throw Error(ErrorKind::Usage, flag + " '" + std::string(text) +
                                      "' needs three or four numbers: wait,warmup,active[,repeat]");
  }
  if (values[2] == 0) throw Error(ErrorKind::Usage, flag + " '" + std::string(text) + "': active must be at least 1");
  ProfileSchedule s;
  s.wait = values[0];
  s.warmup = values[1];
  s.active = values[2];
  s.repeat = values.size() == 4 ? values[3] : 1;
  return s;
}

StepAction step_action(const ProfileSchedule& s, int64_t index) {
  const int64_t cycle = s.wait + s.warmup + s.active;
  if (index < 0 || (s.repeat > 0 && index >= s.repeat * cycle)) return StepAction::Skip;
  const int64_t at = index % cycle;
  if (at < s.wait) return StepAction::Skip;
  if (at < s.wait + s.warmup) return StepAction::Warmup;
  return at == cycle - 1 ? StepAction::RecordAndSave : StepAction::Record;
}

std::string to_string(const ProfileSchedule& s) {
  return std::to_string(s.wait) + "," + std::to_string(s.warmup) + "," + std::to_string(s.active) + "," +
         std::to_string(s.repeat);
}

}  // namespace dsx::trace
