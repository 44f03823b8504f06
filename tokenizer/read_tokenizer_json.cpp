// One reader per component, each checking its "type" and fields. Defaults are those of HF
// tokenizers' serde structs where a field may be absent (ByteLevel's use_regex, an added
// token's flags).
#include "tokenizer/read_tokenizer_json.h"

#include "dsx/error.h"
#include "tokenizer/json_file.h"
#include "tokenizer/utf8.h"

namespace dsx::tokenizer {
namespace {

using json::At;
using json::Value;

[[noreturn]] void unsupported(const At& at, const std::string& what) {
  throw Error(ErrorKind::Unsupported,
              at.file + ": " + at.path + " " + what +
                  "; dsx reads BPE tokenizer.json files, byte-level (GPT-2, Llama 3, Qwen2) or "
                  "SentencePiece-style (Llama 2, Mistral), and SentencePiece tokenizer.model files "
                  "(docs/tokenizers.md)");
}

// Sequences nest; deeper than this is no real file and would only risk the stack.
constexpr int kMaxNesting = 16;
// Ids index tables of that size; the largest real vocabularies are a few hundred thousand.
constexpr int64_t kMaxId = (1 << 24) - 1;
constexpr const char* kIdRange = "is not an id in 0..16777215";

void check_depth(int depth, const At& at) {
  if (depth > kMaxNesting) json::bad_value(at, "nests Sequences more than 16 deep");
}

// Each step of a Sequence component (its array under `key`), with where it was written.
template <class Read>
void for_each_step(const Value& sequence, const At& at, const char* key, Read read) {
  const At list_at = at / key;
  const Value& list = json::require_array(json::require_member(sequence, key, at), list_at);
  for (rapidjson::SizeType i = 0; i < list.Size(); ++i) read(list[i], list_at[i]);
}

std::string type_of(const Value& component, const At& at) {
  json::require_object(component, at);
  return json::as_string(json::require_member(component, "type", at), at / "type");
}

// A Replace step's literal pattern (a non-empty "String"; a "Regex" is refused) and content.
std::pair<std::string, std::string> read_replace(const Value& v, const At& at) {
  const At pattern_at = at / "pattern";
  const Value& pattern = json::require_object(json::require_member(v, "pattern", at), pattern_at);
  if (json::member(pattern, "Regex")) unsupported(pattern_at, "is a Regex; dsx replaces String patterns only");
  std::string text = json::as_string(json::require_member(pattern, "String", pattern_at), pattern_at / "String");
  if (text.empty()) json::bad_value(pattern_at / "String", "is empty");
  return {std::move(text), json::as_string(json::require_member(v, "content", at), at / "content")};
}

// Metaspace's replacement (one character) and prepend rule: prepend_scheme, or the older
// add_prefix_space (true: always).
std::pair<std::string, MetaspacePrepend> read_metaspace(const Value& v, const At& at) {
  std::string replacement = json::as_string(json::require_member(v, "replacement", at), at / "replacement");
  if (replacement.empty() || utf8::decode_at(replacement, 0).length != replacement.size())
    json::bad_value(at / "replacement", "must be one character");
  MetaspacePrepend prepend = MetaspacePrepend::Always;
  if (auto scheme = json::optional_string(v, "prepend_scheme", at)) {
    if (*scheme == "first") prepend = MetaspacePrepend::First;
    else if (*scheme == "never") prepend = MetaspacePrepend::Never;
    else if (*scheme != "always") json::bad_value(at / "prepend_scheme", "is \"" + *scheme + "\", not always, first or never");
  } else if (!json::optional_bool(v, "add_prefix_space", at).value_or(true)) {
    prepend = MetaspacePrepend::Never;
  }
  return {std::move(replacement), prepend};
}

void read_normalizer(const Value& v, const At& at, Normalizer& normalizer, int depth = 0) {
  check_depth(depth, at);
  if (v.IsNull()) return;
  std::string type = type_of(v, at);
  if (type == "NFC") return normalizer.add(UnicodeForm::NFC);
  if (type == "NFD") return normalizer.add(UnicodeForm::NFD);
  if (type == "NFKC") return normalizer.add(UnicodeForm::NFKC);
  if (type == "NFKD") return normalizer.add(UnicodeForm::NFKD);
  if (type == "Prepend") return normalizer.add_prepend(json::as_string(json::require_member(v, "prepend", at), at / "prepend"));
  if (type == "Replace") {
    auto [pattern, content] = read_replace(v, at);
    return normalizer.add_replace(std::move(pattern), std::move(content));
  }
  if (type == "Sequence") {
    return for_each_step(v, at, "normalizers",
                         [&](const Value& step, const At& step_at) { read_normalizer(step, step_at, normalizer, depth + 1); });
  }
  unsupported(at / "type", "is the normalizer \"" + type + "\", which dsx does not implement");
}

SplitBehavior read_behavior(const Value& split, const At& at) {
  std::string name = json::as_string(json::require_member(split, "behavior", at), at / "behavior");
  if (name == "Removed") return SplitBehavior::Removed;
  if (name == "Isolated") return SplitBehavior::Isolated;
  if (name == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (name == "Contiguous") return SplitBehavior::Contiguous;
  unsupported(at / "behavior", "is \"" + name + "\", not a Split behaviour dsx knows");
}

void read_split(const Value& v, const At& at, PreTokenizer& pre) {
  const At pattern_at = at / "pattern";
  const Value& pattern = json::require_object(json::require_member(v, "pattern", at), pattern_at);
  bool literal = false;
  std::string text;
  if (const Value* regex = json::member(pattern, "Regex")) {
    text = json::as_string(*regex, pattern_at / "Regex");
  } else if (const Value* string = json::member(pattern, "String")) {
    text = json::as_string(*string, pattern_at / "String");
    literal = true;
  } else {
    json::bad_value(pattern_at, "must hold \"Regex\" or \"String\"");
  }
  PreTokenizeStep step{PreTokenizeStep::Kind::Split, nullptr, read_behavior(v, at), false};
  step.regex = std::make_shared<RegexSplitter>(text, literal, at.file + ": " + pattern_at.path);
  step.invert = json::optional_bool(v, "invert", at).value_or(false);
  pre.add_step(std::move(step));
}

void read_byte_level(const Value& v, const At& at, PreTokenizer& pre) {
  if (json::optional_bool(v, "add_prefix_space", at).value_or(true)) {
    pre.add_step({PreTokenizeStep::Kind::PrefixSpace, nullptr, SplitBehavior::Isolated, false});
  }
  if (json::optional_bool(v, "use_regex", at).value_or(true)) {
    PreTokenizeStep step{PreTokenizeStep::Kind::Split, nullptr, SplitBehavior::Isolated, false};
    step.regex = std::make_shared<RegexSplitter>(kGpt2Pattern, false, at.file + ": " + at.path);
    pre.add_step(std::move(step));
  }
  pre.set_byte_level(true);
}

void read_pre_tokenizer(const Value& v, const At& at, PreTokenizer& pre, int depth = 0) {
  check_depth(depth, at);
  if (v.IsNull()) return;
  std::string type = type_of(v, at);
  if (pre.byte_level()) {
    // ByteLevel maps bytes to its alphabet; a step after it would see the mapped text.
    unsupported(at, "comes after ByteLevel in the Sequence; dsx supports ByteLevel last only");
  }
  if (type == "Split") return read_split(v, at, pre);
  if (type == "ByteLevel") return read_byte_level(v, at, pre);
  if (type == "Metaspace") {
    auto [replacement, prepend] = read_metaspace(v, at);
    PreTokenizeStep step{PreTokenizeStep::Kind::Metaspace, nullptr, SplitBehavior::MergedWithNext, false, replacement, prepend};
    if (json::optional_bool(v, "split", at).value_or(true))
      step.regex = std::make_shared<RegexSplitter>(replacement, true, at.file + ": " + at.path);
    return pre.add_step(std::move(step));
  }
  if (type == "Sequence") {
    return for_each_step(v, at, "pretokenizers",
                         [&](const Value& step, const At& step_at) { read_pre_tokenizer(step, step_at, pre, depth + 1); });
  }
  unsupported(at / "type", "is the pre-tokenizer \"" + type + "\", which dsx does not implement");
}

Vocabulary read_vocab(const Value& model, const At& at) {
  const At vocab_at = at / "vocab";
  const Value& vocab = json::require_object(json::require_member(model, "vocab", at), vocab_at);
  Vocabulary out;
  out.reserve(vocab.MemberCount());
  for (auto it = vocab.MemberBegin(); it != vocab.MemberEnd(); ++it) {
    std::string token(it->name.GetString(), it->name.GetStringLength());
    int64_t id = json::as_int(it->value, vocab_at / token);
    if (id < 0 || id > kMaxId) json::bad_value(vocab_at / token, kIdRange);
    out.emplace(std::move(token), static_cast<TokenId>(id));
  }
  return out;
}

// Both forms HF accepts: "left right" strings (split at the one space) and [left, right] pairs.
std::vector<std::pair<std::string, std::string>> read_merges(const Value& model, const At& at) {
  const At merges_at = at / "merges";
  std::vector<std::pair<std::string, std::string>> out;
  const Value* merges = json::member(model, "merges");
  if (!merges) return out;
  json::require_array(*merges, merges_at);
  out.reserve(merges->Size());
  for (rapidjson::SizeType i = 0; i < merges->Size(); ++i) {
    const Value& m = (*merges)[i];
    const At m_at = merges_at[i];
    if (m.IsString()) {
      std::string line = json::as_string(m, m_at);
      size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
        json::bad_value(m_at, "is \"" + line + "\", not two tokens separated by one space");
      }
      out.emplace_back(line.substr(0, space), line.substr(space + 1));
    } else if (m.IsArray()) {
      if (m.Size() != 2) json::bad_value(m_at, "must be a pair [left, right]");
      out.emplace_back(json::as_string(m[0], m_at[0]), json::as_string(m[1], m_at[1]));
    } else {
      json::wrong_type(m_at, "a string \"left right\" or a pair [left, right]", m);
    }
  }
  return out;
}

std::unique_ptr<BpeModel> read_model(const Value& v, const At& at) {
  json::require_object(v, at);
  std::string type = json::optional_string(v, "type", at).value_or("BPE");
  if (type != "BPE") {
    unsupported(at / "type", "is \"" + type + "\"; dsx implements the BPE model only");
  }
  if (const Value* dropout = json::member(v, "dropout"); dropout && !dropout->IsNull()) {
    if (!dropout->IsNumber()) json::wrong_type(at / "dropout", "a number or null", *dropout);
    if (dropout->GetDouble() != 0.0)
      unsupported(at / "dropout", "is set; BPE dropout is for training tokenizers");
  }
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto value = json::optional_string(v, affix, at);
    if (value && !value->empty())
      unsupported(at / affix, "is \"" + *value + "\"; dsx does not implement it");
  }
  Vocabulary vocab = read_vocab(v, at);
  BpeOptions options;
  options.ignore_merges = json::optional_bool(v, "ignore_merges", at).value_or(false);
  options.byte_fallback = json::optional_bool(v, "byte_fallback", at).value_or(false);
  options.fuse_unk = json::optional_bool(v, "fuse_unk", at).value_or(false);
  if (auto unk = json::optional_string(v, "unk_token", at)) {
    auto it = vocab.find(*unk);
    if (it == vocab.end())
      json::bad_value(at / "unk_token", "is \"" + *unk + "\", which model.vocab lacks");
    options.unk_id = it->second;
  }
  auto merges = read_merges(v, at);
  return std::make_unique<BpeModel>(std::move(vocab), merges, options, at.file);
}

std::vector<AddedToken> read_added_tokens(const Value& root, const At& at) {
  std::vector<AddedToken> out;
  const Value* list = json::member(root, "added_tokens");
  if (!list || list->IsNull()) return out;
  const At list_at = at / "added_tokens";
  json::require_array(*list, list_at);
  for (rapidjson::SizeType i = 0; i < list->Size(); ++i) {
    const At t_at = list_at[i];
    const Value& t = json::require_object((*list)[i], t_at);
    AddedToken token;
    int64_t id = json::as_int(json::require_member(t, "id", t_at), t_at / "id");
    if (id < 0 || id > kMaxId) json::bad_value(t_at / "id", kIdRange);
    token.id = static_cast<TokenId>(id);
    token.content = json::as_string(json::require_member(t, "content", t_at), t_at / "content");
    if (token.content.empty()) json::bad_value(t_at / "content", "is empty");
    token.special = json::optional_bool(t, "special", t_at).value_or(false);
    token.lstrip = json::optional_bool(t, "lstrip", t_at).value_or(false);
    token.rstrip = json::optional_bool(t, "rstrip", t_at).value_or(false);
    token.single_word = json::optional_bool(t, "single_word", t_at).value_or(false);
    token.normalized = json::optional_bool(t, "normalized", t_at).value_or(!token.special);
    out.push_back(std::move(token));
  }
  return out;
}

std::vector<TokenId> special_ids(const Value& tokens, const std::string& name, const At& at) {
  const Value* entry = json::member(tokens, name.c_str());
  if (!entry) json::bad_value(at, "names \"" + name + "\", which special_tokens lacks");
  const At e_at = at / name;
  json::require_object(*entry, e_at);
  const Value& ids = json::require_array(json::require_member(*entry, "ids", e_at), e_at / "ids");
  std::vector<TokenId> out;
  for (rapidjson::SizeType i = 0; i < ids.Size(); ++i) {
    int64_t id = json::as_int(ids[i], (e_at / "ids")[i]);
    if (id < 0 || id > kMaxId) json::bad_value((e_at / "ids")[i], kIdRange);
    out.push_back(static_cast<TokenId>(id));
  }
  return out;
}

// TemplateProcessing's single template: special tokens before $A are the prefix, after it the
// suffix. (The pair template is for sentence pairs, which dsx does not encode.)
void read_template(const Value& v, const At& at, SpecialTokenTemplate& out) {
  const At single_at = at / "single";
  const Value& single = json::require_array(json::require_member(v, "single", at), single_at);
  const At tokens_at = at / "special_tokens";
  const Value& tokens =
      json::require_object(json::require_member(v, "special_tokens", at), tokens_at);
  bool seen_sequence = false;
  for (rapidjson::SizeType i = 0; i < single.Size(); ++i) {
    const At item_at = single_at[i];
    const Value& item = json::require_object(single[i], item_at);
    if (const Value* special = json::member(item, "SpecialToken")) {
      json::require_object(*special, item_at / "SpecialToken");
      std::string name =
          json::as_string(json::require_member(*special, "id", item_at / "SpecialToken"),
                          item_at / "SpecialToken" / "id");
      auto ids = special_ids(tokens, name, tokens_at);
      auto& side = seen_sequence ? out.suffix : out.prefix;
      side.insert(side.end(), ids.begin(), ids.end());
    } else if (const Value* sequence = json::member(item, "Sequence")) {
      json::require_object(*sequence, item_at / "Sequence");
      std::string id = json::as_string(json::require_member(*sequence, "id", item_at / "Sequence"),
                                       item_at / "Sequence" / "id");
      if (id != "A" || seen_sequence)
        unsupported(item_at, "is a second sequence in the single template");
      seen_sequence = true;
    } else {
      json::bad_value(item_at, "must be a SpecialToken or a Sequence");
    }
  }
}

void read_post_processor(const Value& v, const At& at, SpecialTokenTemplate& out, int depth = 0) {
  check_depth(depth, at);
  if (v.IsNull()) return;
  std::string type = type_of(v, at);
  if (type == "ByteLevel") return;  // offsets only
  if (type == "TemplateProcessing") return read_template(v, at, out);
  if (type == "Sequence") {
    return for_each_step(v, at, "processors",
                         [&](const Value& step, const At& step_at) { read_post_processor(step, step_at, out, depth + 1); });
  }
  unsupported(at / "type", "is the post-processor \"" + type + "\", which dsx does not implement");
}

size_t read_count(const Value& v, const char* key, const At& at) {
  const int64_t n = json::as_int(json::require_member(v, key, at), at / key);
  if (n < 0) json::bad_value(at / key, "must not be negative");
  return size_t(n);
}

void read_decoder(const Value& v, const At& at, Decoder& decoder, int depth = 0) {
  check_depth(depth, at);
  if (v.IsNull()) unsupported(at, "is null; dsx needs the decoder that turns tokens back into text");
  const std::string type = type_of(v, at);
  using Kind = DecodeStep::Kind;
  if (type == "ByteLevel") return decoder.add({Kind::ByteLevel, {}, {}});
  if (type == "ByteFallback") return decoder.add({Kind::ByteFallback, {}, {}});
  if (type == "Fuse") return decoder.add({Kind::Fuse, {}, {}});
  if (type == "Replace") {
    auto [pattern, content] = read_replace(v, at);
    return decoder.add({Kind::Replace, std::move(pattern), std::move(content)});
  }
  if (type == "Strip") {
    std::string c = json::as_string(json::require_member(v, "content", at), at / "content");
    return decoder.add({Kind::Strip, std::move(c), {}, read_count(v, "start", at), read_count(v, "stop", at)});
  }
  if (type == "Metaspace") {
    auto [replacement, prepend] = read_metaspace(v, at);
    return decoder.add({Kind::Metaspace, std::move(replacement), {}, 0, 0, prepend});
  }
  if (type == "Sequence") {
    return for_each_step(v, at, "decoders",
                         [&](const Value& step, const At& step_at) { read_decoder(step, step_at, decoder, depth + 1); });
  }
  unsupported(at / "type", "is the decoder \"" + type + "\", which dsx does not implement");
}

}  // namespace

HfBpeParts parse_tokenizer_json(const std::string& text, const std::string& path) {
  rapidjson::Document doc = json::parse(text, path);
  const At root_at{path, ""};
  json::require_object(doc, root_at);
  for (const char* field : {"truncation", "padding"}) {
    if (const Value* v = json::member(doc, field); v && !v->IsNull()) {
      unsupported(root_at / field, "is set; dsx neither truncates nor pads (set it to null)");
    }
  }
  HfBpeParts parts;
  parts.source = path;
  if (const Value* v = json::member(doc, "normalizer"))
    read_normalizer(*v, root_at / "normalizer", parts.normalizer);
  if (const Value* v = json::member(doc, "pre_tokenizer")) {
    read_pre_tokenizer(*v, root_at / "pre_tokenizer", parts.pre_tokenizer);
  }
  parts.model = read_model(json::require_member(doc, "model", root_at), root_at / "model");
  parts.added_tokens = read_added_tokens(doc, root_at);
  if (const Value* v = json::member(doc, "post_processor")) {
    read_post_processor(*v, root_at / "post_processor", parts.special_template);
  }
  read_decoder(json::require_member(doc, "decoder", root_at), root_at / "decoder", parts.decoder);
  return parts;
}

HfBpeParts read_tokenizer_json(const std::string& path) {
  return parse_tokenizer_json(json::read_file(path), path);
}

}  // namespace dsx::tokenizer
