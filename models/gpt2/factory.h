// Builds a GPT-2 for a device and element type, so the engine can pick CPU or CUDA, fp32 or bf16
// and activation checkpointing from the ds_config without naming the model classes.
#pragma once

#include <memory>

#include "kernels/dtype.h"
#include "models/build_options.h"
#include "models/gpt2/config.h"
#include "models/model.h"

namespace dsx::models {

using GPT2Options = ModelBuildOptions;

// Throws Error(Unsupported) for a combination this build cannot run (CUDA without a CUDA build,
// a 16-bit CPU model).
std::unique_ptr<Model> make_gpt2(const GPT2Config& config, const GPT2Options& options);

// GPUs this process can use: 0 in a build without CUDA, or where no driver or GPU is present.
int cuda_device_count();

// Chooses this process's GPU for local rank `local_rank` (kernels/device_choice.h) before anything
// else touches CUDA. `may_share`: the run's collectives go over ofi, so more ranks than GPUs may
// share them. Nothing in a build without CUDA.
void choose_rank_gpu(int local_rank, bool may_share);

}  // namespace dsx::models
