// Greedy answers of the trained model (see addition_samples.h).
#include "engine/addition_samples.h"

#include <algorithm>
#include <iostream>
#include <sstream>
#include <string>

#include "models/local_params.h"
#include "models/sampling.h"

namespace dsx::engine {

namespace {

std::string answer_line(models::Model& model, models::ParamAccess& access, const models::AdditionTask& task,
                        uint64_t a, uint64_t b) {
  const std::string prompt = task.prompt(a, b);
  models::SampleOptions so;
  so.max_new_tokens = task.digits() + 2;
  so.temperature = 0;
  so.stop_tokens = {'\n'};
  auto out = models::generate(model, access, std::vector<int32_t>(prompt.begin(), prompt.end()), so);
  std::string text(out.begin(), out.end());
  const int64_t got = task.parse_answer(text);
  const bool right = got == static_cast<int64_t>(a + b);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  std::ostringstream line;
  line << "  " << prompt << text << "   (reversed digits: " << a << " + " << b << " = " << got << ", "
       << (right ? "right" : "wrong, " + std::to_string(a + b)) << ")";
  return line.str();
}

}  // namespace

void print_samples(const models::ModelShape& shape, const std::vector<float>& weights, const models::AdditionTask& task,
                   int seq, uint64_t seed, int count) {
  std::cout << "samples from the trained model (greedy; sums it never trained on):\n";
  auto sampler = models::build_host_model(shape, 1, seq);  // on the host, whatever trained
  models::LocalParams<float> local(*sampler);
  std::copy(weights.begin(), weights.end(), local.params());
  for (int i = 0; i < count; ++i) {
    uint64_t a, b;
    task.pair(seed + 99, static_cast<uint64_t>(i), true, a, b);
    std::cout << answer_line(*sampler, local, task, a, b) << "\n";
  }
}

}  // namespace dsx::engine
