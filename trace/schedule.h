// Which steps a trace records, as torch.profiler's schedule: each cycle skips `wait` steps,
// records `warmup` steps and throws them away (first-step effects), then records `active` steps
// and saves them; `repeat` cycles (0: until the run ends).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dsx::trace {

struct ProfileSchedule {
  int64_t wait = 1;
  int64_t warmup = 1;
  int64_t active = 3;
  int64_t repeat = 1;
};

enum class StepAction { Skip, Warmup, Record, RecordAndSave };

// "wait,warmup,active[,repeat]"; throws dsx::Error(Usage) naming `flag` and the bad part.
ProfileSchedule parse_profile_schedule(std::string_view text, const std::string& flag = "--profile_schedule");

// What step `index` of the run (0 = the first step this run trains) does.
StepAction step_action(const ProfileSchedule& schedule, int64_t index);

std::string to_string(const ProfileSchedule& schedule);

}  // namespace dsx::trace
