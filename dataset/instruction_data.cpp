// Instruction and conversation JSONL as masked rows (see instruction_data.h).
#include "dataset/instruction_data.h"

#include <algorithm>

#include "dataset/document_encoder.h"
#include "dataset/document_reader.h"
#include "dataset/jsonl.h"
#include "dsx/error.h"
#include "jinja/json_value.h"
#include "tokenizer/load_tokenizer.h"

namespace dsx::dataset {

namespace {

// Stanford Alpaca's PROMPT_DICT (train.py).
std::string alpaca_prompt(const std::string& instruction, const std::string& input) {
  if (input.empty()) {
    return "Below is an instruction that describes a task. Write a response that appropriately "
           "completes the "
           "request.\n\n### Instruction:\n" +
           instruction + "\n\n### Response:";
  }
  return "Below is an instruction that describes a task, paired with an input that provides "
         "further context. "
         "Write a response that appropriately completes the request.\n\n### Instruction:\n" +
         instruction + "\n\n### Input:\n" + input + "\n\n### Response:";
}

[[noreturn]] void missing(const JsonlLine& at, const char* field) {
  throw Error(ErrorKind::Format,
              at.where() + ": missing field '" + field +
                  "'; each line must hold \"messages\", \"prompt\" and \"response\" (or \"completion\"), "
                  "or Alpaca's \"instruction\", \"output\" and optional \"input\"");
}

const rapidjson::Value* member(const rapidjson::Value& object, const char* key) {
  auto it = object.FindMember(key);
  return it == object.MemberEnd() || it->value.IsNull() ? nullptr : &it->value;
}

// The messages of field `field`, appended to `messages` as the template sees them.
void append_messages(const rapidjson::Value& list, const char* field, const JsonlLine& at,
                     jinja::List& messages) {
  if (!list.IsArray() || list.Empty())
    throw Error(ErrorKind::Format, at.where() + ": field '" + field +
                                       "' must be a non-empty list of {\"role\", \"content\"} objects");
  for (rapidjson::SizeType i = 0; i < list.Size(); ++i) {
    const auto& m = list[i];
    if (!m.IsObject() || !m.HasMember("role") || !m["role"].IsString())
      throw Error(ErrorKind::Format, at.where() + ": " + field + "[" + std::to_string(i) +
                                         "] must be an object with a string \"role\"");
    messages.push_back(jinja::from_json(m));
  }
}

void render_into(InstructionExample& e, const Conversation& c, const JsonlLine& at,
                 const tokenizer::ChatTemplate* chat) {
  if (!chat)
    throw Error(ErrorKind::Format,
                at.where() + ": a conversation needs the model's chat template, and the tokenizer folder has "
                             "none (no chat_template.jinja, no chat_template in tokenizer_config.json); add "
                             "one, or write the examples as \"prompt\" and \"response\" text");
  try {
    e.pieces = render_conversation(*chat, c);
  } catch (const Error& error) {
    throw Error(error.kind(), at.where() + ": " + error.what());
  }
  e.templated = true;
}

// "messages", or "prompt" and "completion" as message lists; false when the line holds neither.
bool read_conversation(const rapidjson::Value& object, const JsonlLine& at,
                       const tokenizer::ChatTemplate* chat, InstructionExample& e) {
  Conversation c;
  if (const auto* messages = member(object, "messages")) {
    append_messages(*messages, "messages", at, c.messages);
    for (const auto& m : c.messages) c.target.push_back(m.as_dict().find("role")->as_string() == "assistant");
    c.generation_blocks_win = true;
  } else if (const auto* prompt = member(object, "prompt"); prompt && prompt->IsArray()) {
    const auto* completion = member(object, "completion");
    if (!completion) missing(at, "completion");
    append_messages(*prompt, "prompt", at, c.messages);
    c.target.assign(c.messages.size(), false);
    append_messages(*completion, "completion", at, c.messages);
    c.target.resize(c.messages.size(), true);
  } else {
    return false;
  }
  if (const auto* tools = member(object, "tools")) c.tools = jinja::from_json(*tools);
  render_into(e, c, at, chat);
  return true;
}

}  // namespace

InstructionExample read_instruction_line(std::string_view text, const std::string& path,
                                         uint64_t line, const tokenizer::ChatTemplate* chat) {
  JsonlLine at{path, line};
  auto object = parse_jsonl_object(text, at);
  InstructionExample e;
  e.line = line;
  if (read_conversation(object, at, chat, e)) return e;
  if (auto prompt = string_member(object, "prompt", at)) {
    auto response = string_member(object, "response", at);
    if (!response) response = string_member(object, "completion", at);
    if (!response) missing(at, "response");
    e.pieces = {{std::move(*prompt), false}, {std::move(*response), true}};
  } else if (auto instruction = string_member(object, "instruction", at)) {
    auto output = string_member(object, "output", at);
    if (!output) missing(at, "output");
    e.pieces = {{alpaca_prompt(*instruction, string_member(object, "input", at).value_or("")), false},
                {std::move(*output), true}};
  } else {
    missing(at, "prompt");
  }
  return e;
}

InstructionRows::InstructionRows(std::vector<Example> examples, int seq_len, int32_t pad,
                                 std::string origin, uint64_t skipped, uint64_t truncated)
    : examples_(std::move(examples)),
      seq_len_(seq_len),
      pad_(pad),
      origin_(std::move(origin)),
      skipped_(skipped),
      truncated_(truncated) {}

void InstructionRows::row(size_t index, int32_t* inputs, int32_t* targets) const {
  const Example& e = examples_[index];
  const size_t n = e.tokens.size() - 1;  // positions with a next token
  for (size_t i = 0; i < static_cast<size_t>(seq_len_); ++i) {
    inputs[i] = i < e.tokens.size() ? e.tokens[i] : pad_;
    targets[i] = i < n && e.trained[i + 1] ? e.tokens[i + 1] : -1;
  }
}

std::string InstructionRows::describe() const {
  return "instruction data '" + origin_ + "' (" + std::to_string(examples_.size()) + " examples, " +
         std::to_string(skipped_) + " left out: no trained token within seq_len)";
}

namespace {

// The pieces of a chunk's examples encoded, then taken back in the order they were handed out.
// Template pieces are encoded apart, with their special tokens. Text pieces (prompt, response)
// are encoded as the running concatenations prompt, prompt+response, as TRL and transformers do:
// encoded apart, a SentencePiece-style tokenizer (Metaspace prepend, tokenizer.model) would start
// the response with a spurious "▁" the model never sees at inference (issue 33, item 4).
class PieceIds {
 public:
  PieceIds(const DocumentEncoder& encoder, const std::vector<InstructionExample>& examples) {
    std::vector<std::string_view> templated;
    for (const auto& e : examples) {
      if (e.templated) {
        for (const auto& piece : e.pieces) templated.push_back(piece.text);
        continue;
      }
      std::string text;
      for (const auto& piece : e.pieces) running_.push_back(text += piece.text);
    }
    const std::vector<std::string_view> plain(running_.begin(), running_.end());
    plain_ = encoder.encode_plain(plain);
    templated_ = encoder.encode_templated(templated);
  }
  const std::vector<TokenId>& next(bool templated) {
    return templated ? templated_[next_templated_++] : plain_[next_plain_++];
  }

 private:
  std::vector<std::string> running_;
  std::vector<std::vector<TokenId>> plain_, templated_;
  size_t next_plain_ = 0, next_templated_ = 0;
};

void append(InstructionRows::Example& row, const std::vector<TokenId>& ids, bool trained) {
  row.tokens.insert(row.tokens.end(), ids.begin(), ids.end());
  row.trained.resize(row.tokens.size(), trained);
}

// prefix + text pieces + EOS (the EOS trained when the response is), or the template's pieces.
// Text pieces: the ids of the whole text; each piece ends where the encoding of the text up to
// its end stops matching the whole's (TRL's rule: a token merged across the join goes with the
// later piece).
InstructionRows::Example tokens_of(const InstructionExample& e, const DocumentEncoder& encoder, PieceIds& ids) {
  InstructionRows::Example row;
  if (e.templated) {
    for (const auto& piece : e.pieces) append(row, ids.next(true), piece.target);
    return row;
  }
  append(row, encoder.prefix(), false);
  std::vector<const std::vector<TokenId>*> running;
  for (size_t k = 0; k < e.pieces.size(); ++k) running.push_back(&ids.next(false));
  const std::vector<TokenId>& whole = *running.back();
  size_t start = 0;
  for (size_t k = 0; k < e.pieces.size(); ++k) {
    const std::vector<TokenId>& upto = *running[k];
    size_t end = k + 1 == e.pieces.size() ? whole.size() : 0;
    while (end < upto.size() && end < whole.size() && upto[end] == whole[end]) ++end;
    end = std::max(end, start);
    append(row, std::vector<TokenId>(whole.begin() + static_cast<std::ptrdiff_t>(start),
                                     whole.begin() + static_cast<std::ptrdiff_t>(end)),
           e.pieces[k].target);
    start = end;
  }
  append(row, {encoder.eos()}, e.pieces.back().target);
  return row;
}

}  // namespace

std::unique_ptr<InstructionRows> read_instruction_rows(const std::string& path,
                                                       const tokenizer::Tokenizer& tokenizer,
                                                       int seq_len, unsigned threads,
                                                       const tokenizer::ChatTemplate* chat) {
  if (seq_len < 1) {
    throw Error(ErrorKind::Config, "instruction data: seq_len must be positive");
  }
  DocumentEncoder encoder(tokenizer, threads);
  DocumentReader reader(path, DocumentSplit::JsonLines, 4u << 20, 256u << 20);
  const size_t limit = static_cast<size_t>(seq_len) + 1;
  std::vector<InstructionRows::Example> rows;
  uint64_t skipped = 0, truncated = 0, lines = 0;
  DocumentChunk chunk;
  while (reader.next(chunk)) {
    std::vector<InstructionExample> examples;
    examples.reserve(chunk.documents.size());
    for (size_t i = 0; i < chunk.documents.size(); ++i) {
      examples.push_back(read_instruction_line(chunk.documents[i], path, chunk.lines[i], chat));
    }
    lines += examples.size();
    PieceIds ids(encoder, examples);
    for (const auto& e : examples) {
      InstructionRows::Example row = tokens_of(e, encoder, ids);
      const size_t kept = std::min(row.tokens.size(), limit);
      if (std::find(row.trained.begin() + 1, row.trained.begin() + static_cast<std::ptrdiff_t>(kept), true) ==
          row.trained.begin() + static_cast<std::ptrdiff_t>(kept)) {
        ++skipped;  // no target within seq_len
        continue;
      }
      if (row.tokens.size() > limit) {
        row.tokens.resize(limit), row.trained.resize(limit), ++truncated;
      }
      rows.push_back(std::move(row));
    }
  }
  if (lines == 0) {
    throw Error(ErrorKind::Format,
                "instruction data '" + path + "': no examples (empty or blank file)");
  }
  return std::make_unique<InstructionRows>(std::move(rows), seq_len, encoder.eos(), path, skipped,
                                           truncated);
}

std::unique_ptr<RowLoader> make_instruction_loader(const std::string& path,
                                                   const tokenizer::Tokenizer& tokenizer,
                                                   const models::TokenLoaderOptions& options,
                                                   unsigned threads,
                                                   const tokenizer::ChatTemplate* chat) {
  auto rows = read_instruction_rows(path, tokenizer, options.seq_len, threads, chat);
  return std::make_unique<RowLoader>(std::move(rows), options, tokenizer.vocab_size());
}

std::unique_ptr<RowLoader> make_instruction_loader(const std::string& path,
                                                   const std::string& tokenizer_folder,
                                                   const models::TokenLoaderOptions& options,
                                                   unsigned threads) {
  auto tokenizer = tokenizer::load_tokenizer(tokenizer_folder);
  const auto chat = tokenizer::read_chat_template(tokenizer_folder);
  return make_instruction_loader(path, *tokenizer, options, threads, chat ? &*chat : nullptr);
}

}  // namespace dsx::dataset
