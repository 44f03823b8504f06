// See token_batch.h.
#include "models/token_batch.h"

#include <cstddef>
#include <string>

#include "dsx/error.h"

namespace dsx::models {

void check_build_sizes(const char* model, int max_batch, int max_seq, int context, const char* context_name) {
  if (max_batch < 1 || max_seq < 1 || max_seq > context)
    throw Error(ErrorKind::Config, std::string(model) + ": batch " + std::to_string(max_batch) + " x sequence " +
                                       std::to_string(max_seq) + " is invalid; the sequence must be in [1, " +
                                       std::to_string(context) + "] (" + context_name + ")");
}

void check_token_batch(const char* model, const int32_t* inputs, const int32_t* targets, int B, int T, int max_batch,
                       int max_seq, int vocab) {
  if (B < 1 || T < 1 || B > max_batch || T > max_seq) {
    throw Error(ErrorKind::Usage, std::string(model) + " forward: batch " + std::to_string(B) + " x " +
                                      std::to_string(T) + " exceeds the " + std::to_string(max_batch) + " x " +
                                      std::to_string(max_seq) + " the model was built for");
  }
  const size_t n = static_cast<size_t>(B) * T;
  for (size_t i = 0; i < n; ++i) {
    const bool bad_input = inputs[i] < 0 || inputs[i] >= vocab;
    if (bad_input || (targets && targets[i] >= vocab)) {
      throw Error(ErrorKind::Format, std::string(model) + " forward: token " +
                                         std::to_string(bad_input ? inputs[i] : targets[i]) + " at row " +
                                         std::to_string(i / T) + ", position " + std::to_string(i % T) +
                                         " is outside the vocabulary [0, " + std::to_string(vocab) +
                                         "); the data does not match this model");
    }
  }
}

}  // namespace dsx::models
