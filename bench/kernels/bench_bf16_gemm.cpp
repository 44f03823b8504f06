// The CPU's bf16 GEMM (kernels/cpu/gemm_bf16.h) on the GPT-2 products of one micro-batch: each
// linear's forward, both backward products, and the tied classifier, beside the fp32 GEMM
// (OpenBLAS) and, given the JSON of bench/kernels/bf16_gemm_peers.py, torch's bf16 matmul on the
// same shapes. Best of --reps after a warm-up; GFLOP/s = 2mnk / time.
//   OMP_NUM_THREADS=1 bench_bf16_gemm [--tokens 1024] [--channels 384] [--vocab 50304]
//                                     [--reps 5] [--peers peers.json]
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_flags.h"
#include "bench/best_time.h"
#include "kernels/cpu/blas_kernels.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/dtype.h"

namespace {

namespace k = dsx::kernels;

using dsx::bench::best_ms;

// One product C (m, n) = op(A) op(B) as the model calls it; `key` matches the peers' JSON.
struct Product {
  std::string key;
  bool trans_a, trans_b;
  size_t m, n, k;
};

// A linear layer out = inp (N, C) @ W (OC, C)^T: forward, d inp = dout @ W, d W = dout^T @ inp.
void add_linear(std::vector<Product>& out, const std::string& name, size_t tokens, size_t oc,
                size_t c) {
  out.push_back({name + " fwd", false, true, tokens, oc, c});
  out.push_back({name + " dinp", false, false, tokens, c, oc});
  out.push_back({name + " dW", true, false, oc, c, tokens});
}

std::map<std::string, double> read_peers(const std::string& path) {
  std::map<std::string, double> ms;
  if (path.empty()) return ms;
  auto doc = dsx::bench::read_peers_json(path);
  if (!doc.IsObject() || !doc.HasMember("rows")) {
    std::fprintf(stderr, "bench_bf16_gemm: %s is not bf16_gemm_peers.py's JSON; ignoring it\n",
                 path.c_str());
    return ms;
  }
  for (const auto& r : doc["rows"].GetArray()) ms[r["key"].GetString()] = r["ms"].GetDouble();
  return ms;
}

void run_product(const Product& p, int reps, const std::map<std::string, double>& peers) {
  std::mt19937 gen(0);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> a(p.m * p.k), b(p.k * p.n), c(p.m * p.n);
  for (float& v : a) v = normal(gen);
  for (float& v : b) v = normal(gen);
  std::vector<uint16_t> a16(a.size()), b16(b.size());
  k::cpu::to_bf16(a16.data(), a.data(), a.size());
  k::cpu::to_bf16(b16.data(), b.data(), b.size());
  const size_t lda = p.trans_a ? p.m : p.k, ldb = p.trans_b ? p.k : p.n;
  const double fp32 = best_ms(reps, [&] {
    k::cpu::gemm<float>(p.trans_a, p.trans_b, p.m, p.n, p.k, 1.0f, a.data(), lda, b.data(), ldb,
                        0.0f, c.data(), p.n);
  });
  const double bf16 = best_ms(reps, [&] {
    k::cpu::gemm_bf16(p.trans_a, p.trans_b, p.m, p.n, p.k, a16.data(), lda, b16.data(), ldb,
                      false, c.data(), p.n);
  });
  const double gflop = 2.0 * double(p.m) * double(p.n) * double(p.k) * 1e-9;
  auto it = peers.find(p.key);
  const double torch = it == peers.end() ? 0 : it->second;
  char torch_text[64] = "n/a", ratio_text[32] = "n/a";
  if (torch > 0) {
    std::snprintf(torch_text, sizeof torch_text, "%.1f", gflop / torch * 1e3);
    std::snprintf(ratio_text, sizeof ratio_text, "%.2fx", torch / bf16);
  }
  std::printf("| %s | %zux%zux%zu | %.1f | %.1f | %.2fx | %s | %s |\n", p.key.c_str(), p.m, p.n,
              p.k, gflop / fp32 * 1e3, gflop / bf16 * 1e3, fp32 / bf16, torch_text, ratio_text);
}

}  // namespace

int main(int argc, char** argv) {
  k::cpu::run_on_the_best_blas_kernels(argv);  // fp32 on the kernels dsx itself runs on
  namespace po = boost::program_options;
  size_t tokens = 1024, channels = 384, vocab = 50304;
  int reps = 5;
  std::string peers_path;
  po::options_description flags("bench_bf16_gemm");
  flags.add_options()("help", "this text")("tokens", po::value(&tokens), "rows of a micro-batch (B*T)")(
      "channels", po::value(&channels), "model width C")("vocab", po::value(&vocab), "padded vocabulary")(
      "reps", po::value(&reps), "timed repetitions")(
      "peers", po::value(&peers_path), "JSON written by bench/kernels/bf16_gemm_peers.py");
  po::variables_map vars;
  if (auto code = dsx::bench::parse_bench_flags(argc, argv, flags, vars, "bench_bf16_gemm"))
    return *code;
  std::vector<Product> products;
  add_linear(products, "qkv", tokens, 3 * channels, channels);
  add_linear(products, "attn proj", tokens, channels, channels);
  add_linear(products, "fc", tokens, 4 * channels, channels);
  add_linear(products, "fc proj", tokens, channels, 4 * channels);
  add_linear(products, "classifier", tokens, vocab, channels);
  auto peers = read_peers(peers_path);
  std::printf("%s\n%s\n\n| product | m x n x k | fp32 OpenBLAS GFLOP/s | dsx bf16 GFLOP/s | bf16 / fp32 | "
              "torch bf16 GFLOP/s | dsx vs torch |\n|---|---|---|---|---|---|---|\n",
              k::cpu::bf16_gemm_choice().note.c_str(), k::cpu::blas_description());
  for (const Product& p : products) run_product(p, reps, peers);
  return 0;
}
