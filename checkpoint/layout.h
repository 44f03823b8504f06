// Where the files of a checkpoint live — DeepSpeed's layout with safetensors instead of pickles:
//
//   <save_dir>/latest                                          the tag of the newest complete save
//   <save_dir>/<tag>/mp_rank_00_model_states.safetensors       rank 0: model weights + engine state
//   <save_dir>/<tag>/zero_pp_rank_<r>_mp_rank_00_model_states.safetensors   stage 3, instead: rank r's
//                                                              engine state (rank 0's: + the weights)
//   <save_dir>/<tag>/zero_pp_rank_<r>_mp_rank_00_optim_states.safetensors   rank r's ZeRO partition
//   <save_dir>/<tag>/manifest.json                             every file's size and CRC32C (dsx)
//
// While a save is in flight its files go to a hidden staging directory, `<save_dir>/.<tag>.saving`;
// commit() swaps it into place as `<tag>` and only then moves `latest`. A directory `<tag>` is
// therefore always complete, and saving again under the same tag never breaks the old copy.
#pragma once

#include <cstdint>
#include <string>

namespace dsx::checkpoint {

// "global_step<N>", DeepSpeed's default tag.
std::string default_tag(int64_t global_step);

// Throws dsx::Error(Usage) unless `tag` can name a directory in save_dir: non-empty, at most 200
// bytes, no '/', no NUL or control characters, not starting with '.', not "latest".
void check_tag(const std::string& tag);

// mp_rank_00_model_states.safetensors
std::string model_states_file_name();
// [bf16_]zero_pp_rank_<r>_mp_rank_00_optim_states.safetensors
std::string zero_optim_states_file_name(int rank, bool bf16);
// zero_pp_rank_<r>_mp_rank_00_model_states.safetensors (stage 3)
std::string zero_model_states_file_name(int rank);

std::string tag_directory(const std::string& save_dir, const std::string& tag);
std::string staging_directory(const std::string& save_dir, const std::string& tag);
std::string latest_file(const std::string& save_dir);

// The tag in `<save_dir>/latest` (surrounding whitespace removed, as DeepSpeed strips it).
// Throws dsx::Error(Io) when the file is missing or unreadable and Format when it holds no tag.
std::string read_latest_tag(const std::string& save_dir);

}  // namespace dsx::checkpoint
