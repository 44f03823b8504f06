// `dsx tokenize FILES... --tokenizer DIR --out DIR`: text and JSONL files to llm.c token shards
// (train_000000.bin, ...; val_*.bin with --val_fraction) through a Hugging Face tokenizer,
// streamed in chunks and encoded on every core (dataset/tokenize_corpus.h, docs/tokenizers.md).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "dataset/tokenize_corpus.h"
#include "dsx/error.h"
#include "tokenizer/load_tokenizer.h"
#include "tools/cli.h"

namespace dsx::tools {
namespace {

constexpr const char* kUsage =
    "dsx tokenize FILES... --tokenizer DIR --out DIR [--shard_tokens N] [--threads N] "
    "[--val_fraction F]\n"
    "  text files: one document a line (--split paragraphs: documents between blank lines);\n"
    "  .jsonl files: the \"text\" string of each line. EOS after every document.";

// On a terminal one line rewritten in place (at most 10 times a second); otherwise a plain line
// every 10 seconds, so logs stay short.
class ProgressLine {
 public:
  ProgressLine() : tty_(::isatty(STDERR_FILENO) == 1), last_(tty_ ? -1e9 : 0) {}
  ~ProgressLine() {
    if (tty_ && shown_) {
      std::fputc('\n', stderr);
    }
  }
  void show(const dataset::TokenizeProgress& p) {
    const double since = p.seconds - last_;
    if (since < (tty_ ? 0.1 : 10.0)) {
      return;
    }
    last_ = p.seconds, shown_ = true;
    const double mb = static_cast<double>(p.bytes_read) / 1e6,
                 total = static_cast<double>(p.bytes_total) / 1e6;
    std::fprintf(
        stderr, "%sdsx tokenize: %.1f / %.1f MB (%.0f%%), %llu documents, %llu tokens, %.1f MB/s%s",
        tty_ ? "\r" : "", mb, total, total > 0 ? 100.0 * mb / total : 100.0,
        static_cast<unsigned long long>(p.documents), static_cast<unsigned long long>(p.tokens),
        p.seconds > 0 ? mb / p.seconds : 0.0, tty_ ? "\033[K" : "\n");
    std::fflush(stderr);
  }

 private:
  bool tty_, shown_ = false;
  double last_;  // when the last line was shown; a log's first line comes after 10 s
};

dataset::DocumentSplit split_named(const std::string& name) {
  if (name == "lines") {
    return dataset::DocumentSplit::Lines;
  }
  if (name == "paragraphs") {
    return dataset::DocumentSplit::Paragraphs;
  }
  throw Error(ErrorKind::Usage,
              "dsx tokenize: --split must be lines or paragraphs, not '" + name + "'");
}

}  // namespace

int run_tokenize(int argc, char** argv) {
  const dataset::TokenizeOptions defaults;  // the pipeline's defaults are the command's
  po::options_description options("dsx tokenize");
  options.add_options()("files", po::value<std::vector<std::string>>(), "text or .jsonl files")(
      "tokenizer", po::value<std::string>(),
      "a Hugging Face model folder (tokenizer.json or tokenizer.model)")(
      "out", po::value<std::string>(),
      "the directory for the shards (made if need be; must hold no shards)")(
      "shard_tokens", po::value<uint64_t>()->default_value(defaults.shard_tokens), "tokens per shard")(
      "threads", po::value<unsigned>()->default_value(defaults.threads), "encoding threads (0: one per core)")(
      "val_fraction", po::value<double>()->default_value(defaults.val_fraction),
      "share of documents for val_*.bin shards")("split",
                                                 po::value<std::string>()->default_value("lines"),
                                                 "documents of a text file: lines or paragraphs")(
      "chunk_size", po::value<std::string>()->default_value("16M"),
      "input read and encoded per step (64K, 16M)");
  po::positional_options_description positional;
  positional.add("files", -1);
  auto args = parse_args(argc, argv, kUsage, options, &positional);
  if (args.help) {
    return 0;
  }
  auto& v = args.vars;
  if (!v.count("files")) {
    throw Error(ErrorKind::Usage, "dsx tokenize: give the text or .jsonl files to tokenize");
  }
  if (!v.count("tokenizer")) {
    throw Error(ErrorKind::Usage, "dsx tokenize: --tokenizer DIR is required (a model folder)");
  }
  if (!v.count("out")) {
    throw Error(ErrorKind::Usage, "dsx tokenize: --out DIR is required (where the shards go)");
  }
  dataset::TokenizeOptions o;
  o.files = v["files"].as<std::vector<std::string>>();
  o.out_dir = v["out"].as<std::string>();
  o.shard_tokens = v["shard_tokens"].as<uint64_t>();
  o.threads = v["threads"].as<unsigned>();
  o.val_fraction = v["val_fraction"].as<double>();
  o.text_split = split_named(v["split"].as<std::string>());
  o.chunk_bytes = parse_byte_size(v["chunk_size"].as<std::string>(), "dsx tokenize: --chunk_size");
  if (o.chunk_bytes == 0) {
    throw Error(ErrorKind::Usage, "dsx tokenize: --chunk_size must be positive");
  }
  auto tokenizer = tokenizer::load_tokenizer(v["tokenizer"].as<std::string>());
  dataset::TokenizeSummary s;
  {
    ProgressLine progress;
    s = dataset::tokenize_corpus(*tokenizer, o,
                                 [&](const dataset::TokenizeProgress& p) { progress.show(p); });
  }
  const auto& t = s.totals;
  std::printf(
      "dsx tokenize: %zu files, %llu documents, %llu tokens, %zu shards (%zu train, %zu val; "
      "uint%zu), "
      "%.2f s, %.1f MB/s -> %s\n",
      s.files, static_cast<unsigned long long>(t.documents),
      static_cast<unsigned long long>(t.tokens), s.train_shards.size() + s.val_shards.size(),
      s.train_shards.size(), s.val_shards.size(), s.token_bytes * 8, t.seconds,
      t.seconds > 0 ? static_cast<double>(t.bytes_read) / 1e6 / t.seconds : 0.0, o.out_dir.c_str());
  return 0;
}

}  // namespace dsx::tools
