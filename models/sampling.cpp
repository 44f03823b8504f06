// Autoregressive sampling (see sampling.h).
#include "models/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "dsx/error.h"

namespace dsx::models {

namespace {

int32_t pick(const float* logits, int V, const SampleOptions& o, std::mt19937_64& rng) {
  if (o.temperature <= 0.0f) return static_cast<int32_t>(std::max_element(logits, logits + V) - logits);
  std::vector<int32_t> ids(V);
  std::iota(ids.begin(), ids.end(), 0);
  int k = o.top_k > 0 ? std::min(o.top_k, V) : V;
  if (k < V)
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                      [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  float maxv = -INFINITY;
  for (int i = 0; i < k; ++i) maxv = std::max(maxv, logits[ids[i]]);
  std::vector<double> weights(k);
  for (int i = 0; i < k; ++i) weights[i] = std::exp((logits[ids[i]] - maxv) / o.temperature);
  std::discrete_distribution<int> dist(weights.begin(), weights.end());
  return ids[dist(rng)];
}

}  // namespace

std::vector<int32_t> generate(Model& model, ParamAccess& access, const std::vector<int32_t>& prompt,
                              const SampleOptions& o) {
  if (prompt.empty()) throw Error(ErrorKind::Usage, "sampling needs a prompt of at least one token");
  std::mt19937_64 rng(o.seed);
  std::vector<int32_t> context = prompt, out;
  const int V = model.vocab_size(), maxT = model.max_seq_len();
  for (int step = 0; step < o.max_new_tokens; ++step) {
    int T = std::min(static_cast<int>(context.size()), maxT);
    const int32_t* window = context.data() + context.size() - T;
    model.forward(window, nullptr, 1, T, access);
    std::vector<float> logits = model.logits();
    int32_t next = pick(logits.data() + static_cast<size_t>(T - 1) * V, V, o, rng);
    out.push_back(next);
    context.push_back(next);
    if (std::find(o.stop_tokens.begin(), o.stop_tokens.end(), next) != o.stop_tokens.end()) break;
  }
  return out;
}

}  // namespace dsx::models
