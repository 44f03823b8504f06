// chat_rows_dump TOKENIZER_DIR JSONL SEQ_LEN OUT_FILE: the rows --data jsonl:FILE makes of the
// file (in file order, nothing shuffled), one JSON object a line, {"inputs": [...], "targets":
// [...]}, for check_chat_with_hf.sh to compare with transformers' apply_chat_template. Not a
// user tool.
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "dataset/instruction_data.h"
#include "dsx/error.h"
#include "tokenizer/load_tokenizer.h"

namespace {

void write_list(std::ostream& out, const std::vector<int32_t>& values) {
  out << '[';
  for (size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  out << ']';
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: chat_rows_dump TOKENIZER_DIR JSONL SEQ_LEN OUT_FILE\n";
    return 2;
  }
  try {
    auto tok = dsx::tokenizer::load_tokenizer(argv[1]);
    const auto chat = dsx::tokenizer::read_chat_template(argv[1]);
    const int seq_len = std::stoi(argv[3]);
    auto rows = dsx::dataset::read_instruction_rows(argv[2], *tok, seq_len, 1, chat ? &*chat : nullptr);
    std::ofstream out(argv[4]);
    std::vector<int32_t> inputs(seq_len), targets(seq_len);
    for (size_t r = 0; r < rows->rows(); ++r) {
      rows->row(r, inputs.data(), targets.data());
      out << "{\"inputs\": ";
      write_list(out, inputs);
      out << ", \"targets\": ";
      write_list(out, targets);
      out << "}\n";
    }
    std::cerr << rows->describe() << "\n";
  } catch (const dsx::Error& e) {
    std::cerr << "chat_rows_dump: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
