// CPU AdamW step of dsx beside the machine's copy bandwidth (STREAM copy, measured in the same run,
// same threads) and, when given the JSON of bench/kernels/cpu_adam_peers.py, beside
// DeepSpeedCPUAdam and torch.optim.AdamW timed round-robin with dsx in one process. Prints one
// markdown table. Traffic per parameter: AdamW reads p, g, m, v and writes p, m, v: 28 bytes; the
// bf16 copy-out adds 2.
//
//   OMP_NUM_THREADS=2 bench_cpu_adam [--sizes 16777216,67108864] [--peers peers.json] [--reps 7]
// Run everything with: bash bench/kernels/run_cpu_adam.sh
#include <omp.h>
#include <rapidjson/document.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_flags.h"
#include "bench/best_time.h"
#include "kernels/optimizers.h"
#include "kernels/simd.h"

namespace {

namespace kn = dsx::kernels;

// Best wall time of `reps` runs after two warm-ups (bench/best_time.h).
template <class F>
double best_ms(int reps, F&& f) {
  return dsx::bench::best_ms(reps, f, 2);
}

// Copy bandwidth as STREAM measures it: b[i] = a[i] over float arrays on all threads, counting
// the bytes read and written (2 x 4 B per element). Arrays first touched by the threads that
// copy them, like the optimizer's buffers.
double copy_gbps(size_t n, int reps) {
  std::unique_ptr<float[]> a(new float[n]), b(new float[n]);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) a[i] = b[i] = 1.0f;
  float* src = a.get();
  float* dst = b.get();
  double ms = best_ms(reps, [&] {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; ++i) dst[i] = src[i];
  });
  return 8.0 * double(n) / ms / 1e6;
}

// The step's own memory traffic with no arithmetic: read p, g, m, v, write p, m, v (28 B/param).
// What a perfect AdamW could reach here; unlike the copy it pays no read-for-ownership of its
// destination (p, m, v are read anyway), so it may exceed the copy figure.
double same_traffic_gbps(size_t n, int reps) {
  std::vector<float> p(n, 1.0f), g(n, 1e-3f), m(n, 0.0f), v(n, 0.0f);
  double ms = best_ms(reps, [&] {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; ++i) {
      float gi = g[i];
      p[i] += gi;
      m[i] += gi;
      v[i] += gi;
    }
  });
  return 28.0 * double(n) / ms / 1e6;
}

struct DsxResult {
  double ms, gbps;
};

DsxResult adamw_dsx(size_t n, bool bf16_copy, int reps) {
  std::vector<float> p(n), g(n), m(n), v(n);
  std::vector<uint16_t> copy(bf16_copy ? n : 0);
  // First-touch in parallel, so pages spread like the loop that uses them.
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    p[i] = 0.01f * float(i % 1000);
    g[i] = 1e-3f * float(i % 7) - 3e-3f;
    m[i] = 0.0f;
    v[i] = 0.0f;
  }
  kn::AdamHyper h;
  h.weight_decay = 0.01f;
  int64_t step = 0;
  kn::ParamCopy out;
  if (bf16_copy) out = {kn::DType::BF16, copy.data()};
  double ms = best_ms(reps, [&] {
    kn::adam_step(h, ++step, 1.0f, p.data(), g.data(), m.data(), v.data(), n, out);
  });
  double bytes = (bf16_copy ? 30.0 : 28.0) * double(n);
  return {ms, bytes / ms / 1e6};
}

// peers[{n, copy}][peer] = ms, from cpu_adam_peers.py's JSON.
using PeerTimes = std::map<std::pair<size_t, std::string>, std::map<std::string, double>>;

PeerTimes read_peers(const std::string& path, int& threads) {
  PeerTimes out;
  if (path.empty()) return out;
  rapidjson::Document doc = dsx::bench::read_peers_json(path);
  if (!doc.IsObject() || !doc.HasMember("results")) {
    std::fprintf(stderr,
                 "bench_cpu_adam: %s is not the JSON that cpu_adam_peers.py writes; ignoring it\n",
                 path.c_str());
    return out;
  }
  if (doc.HasMember("threads") && doc["threads"].IsInt()) threads = doc["threads"].GetInt();
  for (const auto& r : doc["results"].GetArray())
    out[{size_t(r["n"].GetUint64()), r["copy"].GetString()}][r["peer"].GetString()] =
        r["ms"].GetDouble();
  return out;
}

std::string fmt(double v, const char* f = "%.1f") {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  std::string sizes_arg = "16777216,67108864", peers_path, simd;
  int reps = 7;
  po::options_description opts("bench_cpu_adam options");
  opts.add_options()("help", "show this help")("sizes", po::value(&sizes_arg),
                                               "comma-separated parameter counts")(
      "peers", po::value(&peers_path), "JSON written by bench/kernels/cpu_adam_peers.py")(
      "reps", po::value(&reps), "timed runs per case (median is reported)")(
      "simd", po::value(&simd), "force a SIMD level: avx512, avx2 or scalar");
  po::variables_map vm;
  if (auto stop = dsx::bench::parse_bench_flags(argc, argv, opts, vm, "bench_cpu_adam"))
    return *stop;
  if (!simd.empty()) kn::set_simd_level(kn::parse_simd_level(simd));
  std::vector<size_t> sizes;
  std::stringstream ss(sizes_arg);
  for (std::string item; std::getline(ss, item, ',');) sizes.push_back(std::stoull(item));
  int peer_threads = -1;
  PeerTimes peers = read_peers(peers_path, peer_threads);
  int threads = omp_get_max_threads();
  if (peer_threads > 0 && peer_threads != threads)
    std::fprintf(stderr, "warning: peers ran with %d threads, dsx with %d\n", peer_threads,
                 threads);

  std::printf(
      "CPU AdamW step, %d threads, SIMD %s, best of %d runs. GB/s counts 28 B/param (30 with the "
      "bf16 copy).\n\n",
      threads, kn::simd_level_name(kn::simd_level()), reps);
  std::printf(
      "| params | copy-out | dsx ms | dsx GB/s | copy GB/s | dsx / copy | same-traffic GB/s | "
      "dsx / same-traffic | dsx ms beside peers | DeepSpeedCPUAdam ms | torch foreach ms | "
      "torch fused ms | dsx speed-up vs best peer |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (size_t n : sizes) {
    double copy = copy_gbps(2 * n, reps);  // 2n floats each way: as large as p, g, m, v together
    double roof = same_traffic_gbps(n, reps);
    for (bool bf16 : {false, true}) {
      DsxResult r = adamw_dsx(n, bf16, reps);
      std::string key = bf16 ? "bf16" : "none";
      auto it = peers.find({n, key});
      auto peer = [&](const char* name) -> std::string {
        if (it == peers.end() || !it->second.count(name)) return "n/a";
        return fmt(it->second.at(name));
      };
      // The speed-up compares the round-robin timings of the peers script (dsx among them).
      double best = 0, dsx_rr = 0;
      if (it != peers.end())
        for (const auto& [name, ms] : it->second) {
          if (name == "dsx")
            dsx_rr = ms;
          else
            best = best == 0 ? ms : std::min(best, ms);
        }
      // The same-traffic pass has no 16-bit copy: compare the copy-out row against 30/28 of it.
      double roof_here = roof * (bf16 ? 30.0 / 28.0 : 1.0);
      std::printf("| %zuM | %s | %s | %s | %s | %s%% | %s | %s%% | %s | %s | %s | %s | %s |\n",
                  n >> 20, key.c_str(), fmt(r.ms).c_str(), fmt(r.gbps).c_str(), fmt(copy).c_str(),
                  fmt(100 * r.gbps / copy, "%.0f").c_str(), fmt(roof).c_str(),
                  fmt(100 * r.gbps / roof_here, "%.0f").c_str(), peer("dsx").c_str(),
                  peer("deepspeed_cpu_adam").c_str(), peer("torch_foreach").c_str(),
                  peer("torch_fused").c_str(),
                  best > 0 && dsx_rr > 0 ? (fmt(best / dsx_rr, "%.2f") + "x").c_str() : "n/a");
    }
  }
  return 0;
}
