// The NF4 linear layer (kernels/nf4_tensor.h) on the CPU: y = x W^T with W in NF4 (double
// quantised, bf16 compute), dequantised a tile at a time, beside the same product with W already
// dense in fp32 (the BLAS alone: what the dequantisation costs on top), and, given the JSON of
// bench/kernels/nf4_peers.py, beside bitsandbytes' matmul_4bit and torch's dense bf16 linear.
// Best of --reps after a warm-up.
//   OMP_NUM_THREADS=2 bench_nf4_linear [--shapes 4096x4096,11008x4096] [--tokens 16,256]
//                                      [--reps 5] [--peers peers.json]
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "bench/bench_flags.h"
#include "bench/best_time.h"
#include "kernels/cpu/gemm.h"
#include "kernels/nf4_tensor.h"

namespace {

namespace k = dsx::kernels;

using dsx::bench::best_ms;

std::vector<int64_t> split_ints(const std::string& text, char sep) {
  std::vector<int64_t> v;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, sep);) v.push_back(std::stoll(item));
  return v;
}

using Key = std::tuple<int64_t, int64_t, int64_t>;  // rows, cols, tokens
struct PeerMs {
  double bnb = 0, torch_bf16 = 0;
};

std::map<Key, PeerMs> read_peers(const std::string& path) {
  std::map<Key, PeerMs> peers;
  if (path.empty()) return peers;
  auto doc = dsx::bench::read_peers_json(path);
  if (!doc.IsObject() || !doc.HasMember("rows")) {
    std::fprintf(stderr, "bench_nf4_linear: %s is not nf4_peers.py's JSON; ignoring it\n",
                 path.c_str());
    return peers;
  }
  for (const auto& r : doc["rows"].GetArray())
    peers[{r["rows"].GetInt64(), r["cols"].GetInt64(), r["tokens"].GetInt64()}] = {
        r["bnb_ms"].GetDouble(), r["torch_bf16_ms"].GetDouble()};
  return peers;
}

std::string ms_or_na(double ms) {
  if (ms <= 0) return "n/a";
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", ms);
  return text;
}

void run_shape(int64_t rows, int64_t cols, const std::vector<int64_t>& tokens_list, int reps,
               const std::map<Key, PeerMs>& peers) {
  std::mt19937 gen(0);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> w(size_t(rows * cols));
  for (float& v : w) v = normal(gen);
  k::Nf4Tensor q = k::nf4_quantize_matrix(w.data(), k::DType::F32, rows, cols,
                                          {.blocksize = 64, .double_quant = true});
  std::vector<float> dense(w.size());
  k::nf4_dequantize_rows(dense.data(), q, 0, rows);  // the same bf16-rounded weights
  for (int64_t tokens : tokens_list) {
    std::vector<float> x(size_t(tokens * cols)), y(size_t(tokens * rows));
    for (float& v : x) v = normal(gen);
    double nf4 = best_ms(reps, [&] { k::nf4_linear_forward(y.data(), x.data(), q, tokens); });
    double blas = best_ms(reps, [&] {
      k::cpu::gemm<float>(false, true, size_t(tokens), size_t(rows), size_t(cols), 1.0f, x.data(),
                          size_t(cols), dense.data(), size_t(cols), 0.0f, y.data(), size_t(rows));
    });
    auto it = peers.find({rows, cols, tokens});
    PeerMs p = it == peers.end() ? PeerMs{} : it->second;
    std::printf("| %lldx%lld | %lld | %.2f | %.2f | %.2fx | %s | %s | %s |\n",
                static_cast<long long>(rows), static_cast<long long>(cols),
                static_cast<long long>(tokens), nf4, blas, nf4 / blas, ms_or_na(p.bnb).c_str(),
                p.bnb > 0 ? (ms_or_na(p.bnb / nf4) + "x").c_str() : "n/a",
                ms_or_na(p.torch_bf16).c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  std::string shapes = "4096x4096,11008x4096", tokens = "16,256", peers_path;
  int reps = 5;
  po::options_description flags("bench_nf4_linear");
  flags.add_options()("help", "this text")("shapes", po::value(&shapes), "ROWSxCOLS,... (out x in)")(
      "tokens", po::value(&tokens), "token counts")("reps", po::value(&reps), "timed repetitions")(
      "peers", po::value(&peers_path), "JSON written by bench/kernels/nf4_peers.py");
  po::variables_map vars;
  if (auto code = dsx::bench::parse_bench_flags(argc, argv, flags, vars, "bench_nf4_linear"))
    return *code;
  auto peers = read_peers(peers_path);
  std::printf("| W (out x in) | tokens | dsx NF4 ms | dense fp32 BLAS ms | NF4 / dense | "
              "bnb matmul_4bit ms | dsx speed-up vs bnb | torch bf16 linear ms |\n"
              "|---|---|---|---|---|---|---|---|\n");
  std::stringstream in(shapes);
  for (std::string shape; std::getline(in, shape, ',');) {
    auto dims = split_ints(shape, 'x');
    if (dims.size() != 2 || dims[0] < 1 || dims[1] < 1) {
      std::fprintf(stderr, "bench_nf4_linear: --shapes takes ROWSxCOLS, got '%s'\n", shape.c_str());
      return 2;
    }
    run_shape(dims[0], dims[1], split_ints(tokens, ','), reps, peers);
  }
  return 0;
}
