// The checks every model makes of its batches: at build, that the largest batch is one the
// model can run; at each forward, that the micro-batch it is handed has B rows of T tokens within
// the sizes it was built for, every input and every counted target inside its vocabulary.
#pragma once

#include <cstdint>

namespace dsx::models {

// Error(Config) unless max_batch >= 1 and max_seq is in [1, context]; `context_name` says where
// the limit comes from ("max_position_embeddings").
void check_build_sizes(const char* model, int max_batch, int max_seq, int context, const char* context_name);

// `model` names it in the message ("GPT-2", "Llama"). Error(Usage) for a batch larger than
// max_batch x max_seq; Error(Format) naming the row and position of a token outside [0, vocab)
// (targets < 0 are the ignored ones and pass).
void check_token_batch(const char* model, const int32_t* inputs, const int32_t* targets, int B, int T, int max_batch,
                       int max_seq, int vocab);

}  // namespace dsx::models
