// Finding and rendering a folder's chat template (see chat_template.h).
#include "tokenizer/chat_template.h"

#include <filesystem>

#include "dsx/error.h"
#include "tokenizer/json_file.h"

namespace dsx::tokenizer {
namespace fs = std::filesystem;

namespace {

[[noreturn]] void rethrow_in(const std::string& origin, const Error& error) {
  throw Error(ErrorKind::Format, "chat template " + origin + ": " + error.what());
}

}  // namespace

ChatTemplate::ChatTemplate(const std::string& source, std::string origin, const TokenizerConfig& config)
    : origin_(std::move(origin)) {
  try {
    template_ = std::make_shared<const jinja::Template>(source);
  } catch (const Error& e) {
    rethrow_in(origin_, e);
  }
  const std::pair<const char*, const std::optional<std::string>*> tokens[] = {
      {"bos_token", &config.bos_token}, {"eos_token", &config.eos_token},
      {"unk_token", &config.unk_token}, {"pad_token", &config.pad_token}};
  for (const auto& [name, value] : tokens)
    if (*value) special_tokens_.set(name, **value);
}

jinja::Rendered ChatTemplate::render(const jinja::List& messages, bool add_generation_prompt,
                                     const jinja::Value& tools) const {
  jinja::Dict variables = special_tokens_;
  variables.set("messages", messages);
  variables.set("add_generation_prompt", add_generation_prompt);
  if (!tools.is_undefined()) variables.set("tools", tools);
  try {
    return template_->render(variables);
  } catch (const Error& e) {
    rethrow_in(origin_, e);
  }
}

std::optional<ChatTemplate> read_chat_template(const std::string& path) {
  const fs::path folder = fs::is_directory(path) ? fs::path(path) : fs::path(path).parent_path();
  const TokenizerConfig config = read_tokenizer_config((folder / "tokenizer_config.json").string());
  const fs::path file = folder / "chat_template.jinja";
  if (fs::exists(file)) return ChatTemplate(json::read_file(file.string()), file.string(), config);
  if (config.chat_template) return ChatTemplate(*config.chat_template, config.source + " (chat_template)", config);
  return std::nullopt;
}

}  // namespace dsx::tokenizer
