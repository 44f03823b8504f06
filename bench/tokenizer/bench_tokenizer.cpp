// Tokenizer throughput: dsx beside Hugging Face tokenizers (Rust, through its Python package) on
// the same documents (the lines of one text file), on one thread and on all threads, in the same
// run. Each figure is the best of --reps passes over all documents (the first warms both word
// caches). The ids of both are hashed and compared, so a faster wrong answer cannot pass.
//
//   bench_tokenizer --text FILE --model DIR [--model DIR ...] [--threads N] [--reps R]
//                   [--python PY] [--peer bench/tokenizer/hf_tokenizers_peer.py]
//
// bench/tokenizer/run_tokenizer_bench.sh makes the text and the venv and runs this.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dsx/error.h"
#include "tokenizer/json_file.h"
#include "tokenizer/load_tokenizer.h"
#include "tokenizer/parallel_encode.h"

namespace {

using dsx::tokenizer::TokenId;

struct Args {
  std::string text;
  std::vector<std::string> models;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  int reps = 3;
  std::string python = "python3";
  std::string peer = std::string(DSX_SOURCE_DIR) + "/bench/tokenizer/hf_tokenizers_peer.py";
};

struct Run {
  size_t tokens = 0;
  double seconds = 0;
  uint64_t hash = 0;
};

std::vector<std::string_view> lines_of(const std::string& text) {
  std::vector<std::string_view> docs;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    size_t end = nl == std::string::npos ? text.size() : nl + 1;
    docs.push_back(std::string_view(text).substr(start, end - start));
    start = end;
  }
  return docs;
}

uint64_t fnv1a(const std::vector<std::vector<TokenId>>& batches) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (const auto& ids : batches) {
    for (TokenId id : ids) h = (h ^ uint64_t(id)) * 0x100000001B3ull;
  }
  return h;
}

Run run_dsx(const dsx::tokenizer::Tokenizer& tok, const std::vector<std::string_view>& docs,
            unsigned threads, int reps) {
  Run best;
  best.seconds = 1e30;
  std::vector<std::vector<TokenId>> ids;
  for (int r = 0; r < reps; ++r) {
    auto start = std::chrono::steady_clock::now();
    ids = dsx::tokenizer::encode_documents(tok, docs, {}, threads);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best.seconds = std::min(best.seconds, s);
  }
  for (const auto& v : ids) best.tokens += v.size();
  best.hash = fnv1a(ids);
  return best;
}

// api name -> its run, parsed from the peer's "peer api=... tokens=... seconds=... hash=..." lines.
std::map<std::string, Run> run_peer(const Args& args, const std::string& model, unsigned threads) {
  std::string cmd = "'" + args.python + "' '" + args.peer + "' --model '" + model + "' --text '" +
                    args.text + "' --threads " + std::to_string(threads) + " --reps " +
                    std::to_string(args.reps);
  std::map<std::string, Run> out;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return out;
  char line[512];
  while (fgets(line, sizeof line, pipe)) {
    std::istringstream in(line);
    std::string word, api;
    Run run;
    while (in >> word) {
      auto eq = word.find('=');
      if (eq == std::string::npos) continue;
      std::string key = word.substr(0, eq), value = word.substr(eq + 1);
      if (key == "api") api = value;
      if (key == "tokens") run.tokens = std::stoull(value);
      if (key == "seconds") run.seconds = std::stod(value);
      if (key == "hash") run.hash = std::stoull(value);
    }
    if (!api.empty()) out[api] = run;
  }
  if (pclose(pipe) != 0) std::cerr << "bench_tokenizer: the peer failed: " << cmd << "\n";
  return out;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--text") a.text = v;
    else if (k == "--model") a.models.push_back(v);
    else if (k == "--threads") a.threads = unsigned(std::stoul(v));
    else if (k == "--reps") a.reps = std::stoi(v);
    else if (k == "--python") a.python = v;
    else if (k == "--peer") a.peer = v;
    else throw dsx::Error(dsx::ErrorKind::Usage, "unknown option " + k);
  }
  if (a.text.empty() || a.models.empty()) {
    throw dsx::Error(dsx::ErrorKind::Usage, "usage: bench_tokenizer --text FILE --model DIR ...");
  }
  return a;
}

std::string rate(const Run& r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fM", r.seconds > 0 ? r.tokens / r.seconds / 1e6 : 0.0);
  return buf;
}

}  // namespace

int main(int argc, char** argv) try {
  Args args = parse(argc, argv);
  std::string text = dsx::tokenizer::json::read_file(args.text);
  auto docs = lines_of(text);
  std::cout << "text: " << args.text << ", " << text.size() << " bytes, " << docs.size()
            << " documents (lines); best of " << args.reps << " passes\n\n";
  std::cout << "| tokenizer | threads | tokens | dsx tokens/s | HF encode_batch tokens/s | HF "
               "encode_batch_fast tokens/s | dsx / best HF | same ids |\n"
               "|---|---|---|---|---|---|---|---|\n";
  std::vector<unsigned> thread_counts{1};
  if (args.threads > 1) thread_counts.push_back(args.threads);
  for (const std::string& model : args.models) {
    auto tok = dsx::tokenizer::load_tokenizer(model);
    for (unsigned threads : thread_counts) {
      Run ours = run_dsx(*tok, docs, threads, args.reps);
      auto peers = run_peer(args, model, threads);
      double best_peer = 0;
      bool same = !peers.empty();
      for (const auto& [api, run] : peers) {
        best_peer = std::max(best_peer, run.tokens / run.seconds);
        same = same && run.hash == ours.hash && run.tokens == ours.tokens;
      }
      char ratio[32];
      std::snprintf(ratio, sizeof ratio, "%.2fx",
                    best_peer > 0 ? ours.tokens / ours.seconds / best_peer : 0.0);
      std::string name = model.substr(model.find_last_of('/', model.size() - 2) + 1);
      std::cout << "| " << name << " | " << threads << " | " << ours.tokens << " | " << rate(ours)
                << " | " << (peers.count("encode_batch") ? rate(peers["encode_batch"]) : "-")
                << " | "
                << (peers.count("encode_batch_fast") ? rate(peers["encode_batch_fast"]) : "-")
                << " | " << ratio << " | " << (same ? "yes" : "NO") << " |" << std::endl;
    }
  }
  return 0;
} catch (const dsx::Error& e) {
  std::cerr << "bench_tokenizer: " << e.what() << "\n";
  return 1;
}
