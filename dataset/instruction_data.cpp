// Prompt/response JSONL as masked rows (see instruction_data.h).
#include "dataset/instruction_data.h"

#include "dataset/document_encoder.h"
#include "dataset/document_reader.h"
#include "dataset/jsonl.h"
#include "dsx/error.h"
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
                  "'; each line must hold \"prompt\" and \"response\" (or \"completion\"), or "
                  "Alpaca's \"instruction\", \"output\" and optional \"input\"");
}

}  // namespace

InstructionExample read_instruction_line(std::string_view text, const std::string& path,
                                         uint64_t line) {
  JsonlLine at{path, line};
  auto object = parse_jsonl_object(text, at);
  InstructionExample e;
  e.line = line;
  if (auto prompt = string_member(object, "prompt", at)) {
    auto response = string_member(object, "response", at);
    if (!response) {
      response = string_member(object, "completion", at);
    }
    if (!response) {
      missing(at, "response");
    }
    e.prompt = std::move(*prompt), e.response = std::move(*response);
  } else if (auto instruction = string_member(object, "instruction", at)) {
    auto output = string_member(object, "output", at);
    if (!output) {
      missing(at, "output");
    }
    e.prompt = alpaca_prompt(*instruction, string_member(object, "input", at).value_or(""));
    e.response = std::move(*output);
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
    targets[i] = i < n && i + 1 >= e.prompt ? e.tokens[i + 1] : -1;
  }
}

std::string InstructionRows::describe() const {
  return "instruction data '" + origin_ + "' (" + std::to_string(examples_.size()) + " examples, " +
         std::to_string(skipped_) + " left out: no response token within seq_len)";
}

std::unique_ptr<InstructionRows> read_instruction_rows(const std::string& path,
                                                       const tokenizer::Tokenizer& tokenizer,
                                                       int seq_len, unsigned threads) {
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
      examples.push_back(read_instruction_line(chunk.documents[i], path, chunk.lines[i]));
    }
    lines += examples.size();
    std::vector<std::string_view> texts;  // prompts, then responses
    texts.reserve(2 * examples.size());
    for (const auto& e : examples) {
      texts.push_back(e.prompt);
    }
    for (const auto& e : examples) {
      texts.push_back(e.response);
    }
    auto ids = encoder.encode_plain(texts);
    for (size_t i = 0; i < examples.size(); ++i) {
      InstructionRows::Example row;
      row.tokens = encoder.prefix();
      row.tokens.insert(row.tokens.end(), ids[i].begin(), ids[i].end());
      row.prompt = static_cast<uint32_t>(row.tokens.size());
      if (row.prompt >= limit) {  // no response token would be a target
        ++skipped;
        continue;
      }
      const auto& response = ids[examples.size() + i];
      row.tokens.insert(row.tokens.end(), response.begin(), response.end());
      row.tokens.push_back(encoder.eos());
      if (row.tokens.size() > limit) {
        row.tokens.resize(limit), ++truncated;
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
                                                   unsigned threads) {
  auto rows = read_instruction_rows(path, tokenizer, options.seq_len, threads);
  return std::make_unique<RowLoader>(std::move(rows), options, tokenizer.vocab_size());
}

std::unique_ptr<RowLoader> make_instruction_loader(const std::string& path,
                                                   const std::string& tokenizer_folder,
                                                   const models::TokenLoaderOptions& options,
                                                   unsigned threads) {
  auto tokenizer = tokenizer::load_tokenizer(tokenizer_folder);
  return make_instruction_loader(path, *tokenizer, options, threads);
}

}  // namespace dsx::dataset
