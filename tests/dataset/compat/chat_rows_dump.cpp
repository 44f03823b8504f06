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

void dump_rows(const char* folder, const char* jsonl, int seq_len, const char* out_file) {
  auto tok = dsx::tokenizer::load_tokenizer(folder);
  const auto chat = dsx::tokenizer::read_chat_template(folder);
  auto rows = dsx::dataset::read_instruction_rows(jsonl, *tok, seq_len, 1, chat ? &*chat : nullptr);
  std::ofstream out(out_file);
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
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 5) {
    std::cerr << "usage: chat_rows_dump TOKENIZER_DIR JSONL SEQ_LEN OUT_FILE\n";
    return 2;
  }
  dump_rows(argv[1], argv[2], std::stoi(argv[3]), argv[4]);
  return 0;
} catch (const dsx::Error& e) {
  std::cerr << "chat_rows_dump: " << e.what() << "\n";
  return 1;
}
