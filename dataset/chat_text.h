// A conversation rendered for training: the text the model's chat template writes (what
// transformers' apply_chat_template writes), cut into pieces that are trained on (what the
// assistant says) and pieces that are not.
#pragma once

#include <string>
#include <vector>

#include "jinja/value.h"
#include "tokenizer/chat_template.h"

namespace dsx::dataset {

struct TextPiece {
  std::string text;
  bool target = false;
};

struct Conversation {
  jinja::List messages;      // as the template sees them ({"role": ..., "content": ...})
  std::vector<bool> target;  // one per message: trained on
  jinja::Value tools;        // the template's `tools`; undefined when the example has none
  // Take the template's {% generation %} blocks as the trained text where it has them (the
  // assistant's turns, as transformers' return_assistant_tokens_mask does) instead of `target`.
  bool generation_blocks_win = false;
};

// The pieces, in order, whose texts concatenate to the whole conversation rendered without a
// generation prompt. Trained text: the {% generation %} blocks (see above), else for each run of
// target messages i..j the text from the end of messages[:i] rendered with the generation prompt
// to the end of messages[:j+1]. Error(Format) when the template does not render those beginnings
// as beginnings of the whole (it rewrites earlier turns), saying to mark the assistant's part
// with {% generation %}.
std::vector<TextPiece> render_conversation(const tokenizer::ChatTemplate& chat,
                                           const Conversation& conversation);

}  // namespace dsx::dataset
