// dump_ids MODEL_DIR TEXT_FILE OUT_FILE [--lines]: the ids dsx gives for the whole file (with the
// tokenizer's BOS/EOS rules), one per line, for check_with_hf.sh to compare with the Python
// libraries' ids; with --lines, each line of the file (without its '\n') as one document, its ids
// on one line separated by spaces (unigram_tie_break.py). Not a user tool: `dsx tokenize` is.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "dsx/error.h"
#include "tokenizer/json_file.h"
#include "tokenizer/load_tokenizer.h"

int main(int argc, char** argv) {
  const bool lines = argc == 5 && std::string(argv[4]) == "--lines";
  if (argc != 4 && !lines) {
    std::cerr << "usage: dump_ids MODEL_DIR TEXT_FILE OUT_FILE [--lines]\n";
    return 2;
  }
  try {
    auto tok = dsx::tokenizer::load_tokenizer(argv[1]);
    const std::string text = dsx::tokenizer::json::read_file(argv[2]);
    std::ofstream out(argv[3]);
    if (lines) {
      std::istringstream in(text);
      for (std::string line; std::getline(in, line);) {
        const char* sep = "";
        for (auto id : tok->encode(line)) out << sep << id, sep = " ";
        out << '\n';
      }
    } else {
      auto ids = tok->encode(text);
      for (auto id : ids) out << id << '\n';
      std::cerr << tok->describe() << ": " << ids.size() << " ids\n";
    }
  } catch (const dsx::Error& e) {
    std::cerr << "dump_ids: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
