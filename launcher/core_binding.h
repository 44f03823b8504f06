// --bind_cores_to_rank / --bind_core_list: split a list of CPU cores evenly over the ranks of a
// node, as DeepSpeed does (cores_per_rank = cores // ranks, rank i gets the i-th block). dsx
// binds with sched_setaffinity in the child, so numactl is not needed.
#pragma once

#include <string>
#include <vector>

namespace dsx::launcher {

// "1,3-5,7" -> {1,3,4,5,7}. Items must ascend without overlap and without spaces; throws
// dsx::Error(Usage) otherwise.
std::vector<int> parse_core_list(const std::string& text);

// The CPUs this process may run on (its affinity mask), ascending.
std::vector<int> available_cores();

// The cores of the rank at `index` of `local_size` ranks. Throws when there are fewer cores than
// ranks.
std::vector<int> cores_for_rank(const std::vector<int>& cores, int local_size, int index);

}  // namespace dsx::launcher
