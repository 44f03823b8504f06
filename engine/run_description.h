// What a checkpoint keeps about the run besides the tensors: the model's shape and the folder it
// came from (for dsx export and its tokenizer files), the seed (data order and initial weights;
// training itself draws no random numbers) and the ds_config as written.
#pragma once

#include <cstdint>
#include <string>

#include "models/model_source.h"

namespace dsx::engine {

// The description as one JSON object.
std::string run_description(const models::ModelSource& model, uint64_t seed, const std::string& config_path);

}  // namespace dsx::engine
