// Internal: the readers of the ds_config blocks that need more than a field list, shared by
// read_ds_config.cpp (which walks the top level) and the files that hold them.
#pragma once

#include "config/field_reader.h"

namespace dsx::config::detail {

// The member's object, or nullptr (absent). A non-object is an error; null is an error unless
// `null_ok` (then it reads as absent).
const json::Value* object_of(ReadContext& ctx, const json::Member* m, const std::string& path,
                             bool null_ok = false);

// zero_optimization, including the legacy boolean form and the deprecated cpu_offload* keys.
// `top` is the top-level object (for allgather_size).
void read_zero(ReadContext& ctx, const json::Member* member, const json::Value& top);
void read_optimizer(ReadContext& ctx, const json::Member* member);
void read_scheduler(ReadContext& ctx, const json::Member* member);

// Keys DeepSpeed no longer supports (removed features): each present one is an error.
void reject_removed_top_level_keys(ReadContext& ctx, BlockReader& top, const json::Value* root);
void reject_removed_zero_keys(ReadContext& ctx, BlockReader& zero, const json::Value* object);

// "auto" the way Hugging Face's HfTrainerDeepSpeedConfig fills it.
AutoResolution resolve_hf_auto(const ReadContext& ctx, const std::string& path);

// The cross-key rules DeepSpeed checks at engine init (ref/ds_config.md §7.5).
void check_rules(ReadContext& ctx);

}  // namespace dsx::config::detail
