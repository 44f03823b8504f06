// Instruction data for fine-tuning (--data jsonl:FILE): each non-blank line one JSON object,
// one example a row, the loss only on the response.
//
// Fields, the first form present wins:
//   "messages": [{"role": ..., "content": ...}, ...]: a conversation, rendered through the
//     tokenizer folder's chat template (chat_text.h), trained on the assistant's turns (the
//     template's {% generation %} blocks where it marks them); optional "tools" go to the template;
//   "prompt" + "completion" as message lists (TRL's conversational prompt-completion form): the
//     conversation prompt + completion, trained on the completion;
//   "prompt" + "response"  (or "prompt" + "completion", TRL's prompt-completion form): as written;
//   "instruction" + "output", optional "input": Stanford Alpaca's prompt template around them
//     ("Below is an instruction ... ### Instruction:\n{instruction}\n\n[### Input:\n{input}\n\n]
//     ### Response:"), its response the output.
// Tokens of text fields: prefix (BOS where the tokenizer's rules add one) + prompt + response +
// EOS, prompt + response encoded together (special-token strings as text), the response's tokens
// those after the prefix that matches the prompt's own encoding (as TRL does). Tokens of a
// conversation: what the template wrote (it writes BOS and the end-of-turn tokens itself; the
// special-token strings it writes are their ids), trained and untrained pieces encoded apart.
// Truncated from the right to seq_len + 1 tokens; row inputs are the first seq_len, targets the
// next token, -1 where that token is not trained on and on the padding after the example (inputs
// padded with EOS). An example with no trained token within seq_len is left out (counted in
// skipped()).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dataset/chat_text.h"
#include "dataset/row_loader.h"
#include "models/data/token_loader.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace dsx::dataset {

struct InstructionExample {
  std::vector<TextPiece> pieces;  // the example's text in order, each trained on or not
  bool templated = false;         // the pieces are a chat template's output
  uint64_t line = 0;
};

// The example of one line; Error(Format) "FILE:LINE: missing field 'response' ..." when the
// line is not an object holding one of the field sets above, "FILE:LINE: ..." when it holds a
// conversation and there is no chat template or the template fails on it.
InstructionExample read_instruction_line(std::string_view text, const std::string& path,
                                         uint64_t line, const tokenizer::ChatTemplate* chat);

class InstructionRows final : public RowSource {
 public:
  struct Example {
    std::vector<int32_t> tokens;  // at most seq_len + 1
    std::vector<bool> trained;    // per token: a target (predicted and counted in the loss)
  };
  InstructionRows(std::vector<Example> examples, int seq_len, int32_t pad, std::string origin,
                  uint64_t skipped, uint64_t truncated);
  size_t rows() const override { return examples_.size(); }
  int seq_len() const override { return seq_len_; }
  void row(size_t index, int32_t* inputs, int32_t* targets) const override;
  std::string describe() const override;
  uint64_t skipped() const { return skipped_; }      // nothing trained within seq_len: left out
  uint64_t truncated() const { return truncated_; }  // response cut at seq_len + 1 tokens

 private:
  std::vector<Example> examples_;
  int seq_len_;
  int32_t pad_;
  std::string origin_;
  uint64_t skipped_, truncated_;
};

// The rows of a JSONL file, encoded in parallel chunk by chunk; `chat` renders its
// conversations (none: a line holding one is an error).
std::unique_ptr<InstructionRows> read_instruction_rows(const std::string& path,
                                                       const tokenizer::Tokenizer& tokenizer,
                                                       int seq_len, unsigned threads = 0,
                                                       const tokenizer::ChatTemplate* chat = nullptr);

// --data jsonl:FILE: this rank's examples, one a row, vocab_size() the tokenizer's.
std::unique_ptr<RowLoader> make_instruction_loader(const std::string& path,
                                                   const tokenizer::Tokenizer& tokenizer,
                                                   const models::TokenLoaderOptions& options,
                                                   unsigned threads = 0,
                                                   const tokenizer::ChatTemplate* chat = nullptr);
// The tokenizer and chat template of a folder (tokenizer/chat_template.h says which).
std::unique_ptr<RowLoader> make_instruction_loader(const std::string& path,
                                                   const std::string& tokenizer_folder,
                                                   const models::TokenLoaderOptions& options,
                                                   unsigned threads = 0);

}  // namespace dsx::dataset
