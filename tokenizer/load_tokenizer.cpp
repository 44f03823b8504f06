// tokenizer.json is preferred, as transformers' AutoTokenizer prefers it (a Llama 2 folder's is
// converted from its tokenizer.model and gives the same ids); when dsx refuses it as unsupported
// and tokenizer.model is there too, tokenizer.model.
// BOS and EOS come from tokenizer_config.json (bos_token, eos_token). What encode adds: when the
// config sets add_bos_token or add_eos_token, exactly that (transformers rebuilds the
// post-processor from them); otherwise what tokenizer.json's post-processor adds (Llama 3's
// TemplateProcessing adds <|begin_of_text|>; GPT-2 and Qwen2 add nothing).
// A tokenizer.model is read as transformers reads it: a BPE model in a folder whose
// tokenizer_class is LlamaTokenizer (Llama 2, Mistral) is converted as LlamaTokenizer converts it
// (llama_tokenizer_from_model.h); any other goes through libsentencepiece.
#include "tokenizer/load_tokenizer.h"

#include <filesystem>

#include "dsx/error.h"
#include "tokenizer/hf_bpe_tokenizer.h"
#include "tokenizer/llama_tokenizer_from_model.h"
#include "tokenizer/read_tokenizer_json.h"
#include "tokenizer/sentencepiece_model_file.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/tokenizer_config.h"

namespace dsx::tokenizer {
namespace {

namespace fs = std::filesystem;

std::optional<TokenId> find_token(const HfBpeParts& parts, const std::string& token) {
  for (const AddedToken& added : parts.added_tokens) {
    if (added.content == token) return added.id;
  }
  return parts.model->token_to_id(token);
}

std::optional<TokenId> config_token(const HfBpeParts& parts, const TokenizerConfig& config,
                                    const std::optional<std::string>& token, const char* field) {
  if (!token) return std::nullopt;
  auto id = find_token(parts, *token);
  if (!id) {
    throw Error(ErrorKind::Format, config.source + ": " + field + " is \"" + *token + "\", which " +
                                       parts.source +
                                       " does not have (are the two files from different models?)");
  }
  return id;
}

// The token an add_*_token flag asks for, which tokenizer_config.json must name.
TokenId named_token(const std::optional<TokenId>& token, const TokenizerConfig& config, const char* flag,
                    const char* key, const char* what) {
  if (!token) {
    throw Error(ErrorKind::Format, config.source + ": " + flag + " is true but " + key + " is not set (name the " +
                                       what + " token)");
  }
  return *token;
}

// BOS, EOS and what encode adds around the text, from tokenizer_config.json; `default_template`
// when it sets neither add_bos_token nor add_eos_token.
std::unique_ptr<Tokenizer> finish(HfBpeParts parts, const TokenizerConfig& config,
                                  std::optional<SpecialTokenTemplate> default_template) {
  parts.bos = config_token(parts, config, config.bos_token, "bos_token");
  parts.eos = config_token(parts, config, config.eos_token, "eos_token");
  if (config.add_bos_token || config.add_eos_token) {
    parts.special_template = {};
    if (config.add_bos_token.value_or(false))
      parts.special_template.prefix.push_back(named_token(parts.bos, config, "add_bos_token", "bos_token", "BOS"));
    if (config.add_eos_token.value_or(false))
      parts.special_template.suffix.push_back(named_token(parts.eos, config, "add_eos_token", "eos_token", "EOS"));
  } else if (default_template) {
    parts.special_template = *default_template;
  }
  return std::make_unique<HfBpeTokenizer>(std::move(parts));
}

std::unique_ptr<Tokenizer> load_json(const std::string& json_path, const TokenizerConfig& config) {
  return finish(read_tokenizer_json(json_path), config, std::nullopt);
}

bool is_llama_tokenizer_class(const TokenizerConfig& config) {
  return config.tokenizer_class == "LlamaTokenizer" ||
         config.tokenizer_class == "LlamaTokenizerFast";
}

std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& model_path,
                                              const TokenizerConfig& config) {
  if (is_llama_tokenizer_class(config)) {
    SentencePieceModelFile model = read_sentencepiece_model(model_path);
    if (model.spec.model_type == SentencePieceSpec::ModelType::Bpe) {
      HfBpeParts parts = llama_tokenizer_from_model(
          model, {config.legacy, config.add_prefix_space},
          model_path + " (SentencePiece, as transformers' LlamaTokenizer reads it)");
      // LlamaTokenizer's defaults: "<s>" and "</s>", BOS added, no EOS.
      TokenizerConfig with_defaults = config;
      if (!config.bos_token && find_token(parts, "<s>")) with_defaults.bos_token = "<s>";
      if (!config.eos_token && find_token(parts, "</s>")) with_defaults.eos_token = "</s>";
      SpecialTokenTemplate bos_only;
      if (with_defaults.bos_token)
        bos_only.prefix.push_back(
            *config_token(parts, with_defaults, with_defaults.bos_token, "bos_token"));
      return finish(std::move(parts), with_defaults, bos_only);
    }
  }
  SentencePieceRules rules;
  rules.add_bos = config.add_bos_token.value_or(true);
  rules.add_eos = config.add_eos_token.value_or(false);
  rules.bos_token = config.bos_token;
  rules.eos_token = config.eos_token;
  return std::make_unique<SentencePieceTokenizer>(model_path, rules);
}

[[noreturn]] void no_tokenizer_in(const fs::path& dir) {
  std::string present;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!present.empty()) present += ", ";
    present += entry.path().filename().string();
    if (present.size() > 200) {
      present += ", ...";
      break;
    }
  }
  throw Error(ErrorKind::Io,
              dir.string() + ": holds neither tokenizer.json nor tokenizer.model " +
                  (present.empty() ? "(it is empty)" : "(it holds " + present + ")") +
                  "; copy the tokenizer files of the Hugging Face model into it "
                  "(they sit beside config.json)");
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  std::error_code ec;
  fs::path given(path);
  if (!fs::exists(given, ec)) {
    throw Error(ErrorKind::Io, path +
                                   ": no such file or folder (give a Hugging Face model folder "
                                   "or its tokenizer.json / tokenizer.model)");
  }
  fs::path dir = fs::is_directory(given, ec) ? given : given.parent_path();
  if (dir.empty()) dir = ".";
  TokenizerConfig config = read_tokenizer_config((dir / "tokenizer_config.json").string());
  if (!fs::is_directory(given, ec)) {
    if (given.extension() == ".model") return load_sentencepiece(given.string(), config);
    return load_json(given.string(), config);
  }
  const bool has_model = fs::exists(dir / "tokenizer.model", ec);
  if (fs::exists(dir / "tokenizer.json", ec)) {
    try {
      return load_json((dir / "tokenizer.json").string(), config);
    } catch (const Error& e) {
      // Llama 2 and Mistral folders hold both: a tokenizer.json converted from SentencePiece
      // (byte_fallback, Metaspace) that dsx refuses, and the tokenizer.model it came from.
      if (e.kind() != ErrorKind::Unsupported || !has_model) throw;
    }
  }
  if (has_model) {
    return load_sentencepiece((dir / "tokenizer.model").string(), config);
  }
  no_tokenizer_in(dir);
}

}  // namespace dsx::tokenizer
