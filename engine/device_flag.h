// `dsx train --device`: whether the model computes on the GPU.
#pragma once

#include <string>

#include "models/model_source.h"

namespace dsx::engine {

// "cpu", "cuda", or "auto" (the GPU where the build has CUDA, one is visible and the model's
// family has CUDA kernels). Throws dsx::Error: Usage for another word, Unsupported for "cuda"
// where no GPU is visible.
bool wants_cuda(const std::string& device, const models::ModelShape& shape);

}  // namespace dsx::engine
