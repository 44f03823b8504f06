// generation_config.json, the part sampling needs: the ids generation stops at. A chat model
// ends its turn with a token of its own (Llama 3's <|eot_id|>, Qwen2's <|im_end|>) that
// transformers' generate stops at because this file lists it beside the EOS.
#pragma once

#include <string>
#include <vector>

namespace dsx::tokenizer {

// eos_token_id of FOLDER/generation_config.json (one id or a list); none when the file or the
// key is absent. Error(Format) naming the file and key when it is neither.
std::vector<int32_t> generation_stop_ids(const std::string& folder);

}  // namespace dsx::tokenizer
