// ds_config checkpoint.tag_validation (Ignore, Warn, Fail), as DeepSpeed applies it at every
// save: all ranks must be saving under the same tag, because a tag that differs per rank (say, one
// holding the rank) breaks loading with another world size. The engine gathers every rank's tag
// and calls check_tag_agreement with them.
#pragma once

#include <optional>
#include <span>
#include <string>

namespace dsx::checkpoint {

enum class TagValidation { Ignore, Warn, Fail };

// Case-insensitive "Ignore" / "Warn" / "Fail"; anything else is a dsx::Error(Config) that quotes
// the value and the accepted ones (DeepSpeed's "invalid tag_validation value").
TagValidation parse_tag_validation(const std::string& value);

// Warn: returns the warning (DeepSpeed's wording) when the tags differ; Fail: throws
// dsx::Error(Config) with it; Ignore: never checks.
std::optional<std::string> check_tag_agreement(TagValidation mode, int rank,
                                               std::span<const std::string> tags_of_all_ranks);

}  // namespace dsx::checkpoint
