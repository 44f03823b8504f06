// The check every model's forward makes of the micro-batch it is handed: B rows of T tokens
// within the sizes it was built for, every input and every counted target inside its vocabulary.
#pragma once

#include <cstdint>

namespace dsx::models {

// `model` names it in the message ("GPT-2", "Llama"). Error(Usage) for a batch larger than
// max_batch x max_seq; Error(Format) naming the row and position of a token outside [0, vocab)
// (targets < 0 are the ignored ones and pass).
void check_token_batch(const char* model, const int32_t* inputs, const int32_t* targets, int B, int T, int max_batch,
                       int max_seq, int vocab);

}  // namespace dsx::models
