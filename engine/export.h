// `dsx export`: one consolidated weights file from a training checkpoint (DeepSpeed's
// zero_to_fp32, built in): the full model from the checkpoint's model states, written as
// safetensors with Hugging Face's GPT-2 names in fp32 or bf16, with a config.json beside it, so
// transformers' GPT2LMHeadModel and `dsx sample` load it.
#pragma once

#include <string>

#include "kernels/dtype.h"

namespace dsx::engine {

// `tag` "" = latest. Returns the tag exported. Throws dsx::Error naming the file on a damaged
// checkpoint.
std::string export_checkpoint(const std::string& checkpoint_dir, const std::string& tag, const std::string& out_path,
                              kernels::DType dtype);

}  // namespace dsx::engine
