// dump_ids MODEL_DIR TEXT_FILE OUT_FILE: the ids dsx gives for the whole file (with the
// tokenizer's BOS/EOS rules), one per line, for check_with_hf.sh to compare with the Python
// libraries' ids. Not a user tool: `dsx tokenize` is.
#include <fstream>
#include <iostream>

#include "dsx/error.h"
#include "tokenizer/json_file.h"
#include "tokenizer/load_tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: dump_ids MODEL_DIR TEXT_FILE OUT_FILE\n";
    return 2;
  }
  try {
    auto tok = dsx::tokenizer::load_tokenizer(argv[1]);
    auto ids = tok->encode(dsx::tokenizer::json::read_file(argv[2]));
    std::ofstream out(argv[3]);
    for (auto id : ids) out << id << '\n';
    std::cerr << tok->describe() << ": " << ids.size() << " ids\n";
  } catch (const dsx::Error& e) {
    std::cerr << "dump_ids: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
