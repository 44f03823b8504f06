// A model folder's chat template, rendered as transformers' apply_chat_template renders it: the
// folder's chat_template.jinja when there is one (transformers writes it beside the config since
// 4.43, and it wins), else tokenizer_config.json's chat_template; the template sees the messages,
// add_generation_prompt, tools and the special tokens (bos_token, eos_token, unk_token, pad_token).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "jinja/template.h"
#include "tokenizer/tokenizer_config.h"

namespace dsx::tokenizer {

class ChatTemplate {
 public:
  // Error(Format) "ORIGIN: line N: ..." when the source is not a template dsx reads.
  ChatTemplate(const std::string& source, std::string origin, const TokenizerConfig& config);

  // Error(Format) "chat template ORIGIN: ..." when rendering fails or the template raises.
  // `tools` (the functions a conversation may call) is left undefined when not given.
  jinja::Rendered render(const jinja::List& messages, bool add_generation_prompt,
                         const jinja::Value& tools = {}) const;
  bool marks_generation() const { return template_->has_generation_blocks(); }
  const std::string& origin() const { return origin_; }

 private:
  std::shared_ptr<const jinja::Template> template_;
  std::string origin_;
  jinja::Dict special_tokens_;
};

// The chat template of a tokenizer folder (or of the folder of a tokenizer file); nullopt when it
// has none.
std::optional<ChatTemplate> read_chat_template(const std::string& path);

}  // namespace dsx::tokenizer
