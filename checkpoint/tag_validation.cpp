// checkpoint.tag_validation.
#include "checkpoint/tag_validation.h"

#include <algorithm>
#include <cctype>

#include "dsx/error.h"

namespace dsx::checkpoint {

TagValidation parse_tag_validation(const std::string& value) {
  std::string upper = value;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return std::toupper(c); });
  if (upper == "IGNORE") return TagValidation::Ignore;
  if (upper == "WARN") return TagValidation::Warn;
  if (upper == "FAIL") return TagValidation::Fail;
  throw Error(ErrorKind::Config,
              "checkpoint.tag_validation is \"" + value +
                  "\": use one of \"Ignore\", \"Warn\" (the default) or \"Fail\"");
}

std::optional<std::string> check_tag_agreement(TagValidation mode, int rank,
                                               std::span<const std::string> tags) {
  if (mode == TagValidation::Ignore || tags.empty()) return std::nullopt;
  const bool same =
      std::all_of(tags.begin(), tags.end(), [&](const std::string& t) { return t == tags[0]; });
  if (same) return std::nullopt;
  const std::string mine =
      rank >= 0 && static_cast<size_t>(rank) < tags.size() ? tags[rank] : tags[0];
  auto other =
      std::find_if(tags.begin(), tags.end(), [&](const std::string& t) { return t != mine; });
  std::string message = "[rank=" + std::to_string(rank) + "] The checkpoint tag name '" + mine +
                        "' is not consistent across all ranks (rank " +
                        std::to_string(other - tags.begin()) + " saves '" + *other +
                        "'). Including rank unique information in checkpoint tag could cause "
                        "issues when restoring with different world sizes.";
  if (mode == TagValidation::Fail)
    throw Error(ErrorKind::Config, message +
                                       " (checkpoint.tag_validation is \"Fail\": give every "
                                       "rank the same tag, or set it to \"Warn\")");
  return message;
}

}  // namespace dsx::checkpoint
