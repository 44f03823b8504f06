// The addition task (see addition.h).
#include "models/data/addition.h"

#include <algorithm>

#include "dsx/error.h"

namespace dsx::models {

namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::string padded(uint64_t v, int width) {
  std::string s = std::to_string(v);
  return std::string(width - static_cast<int>(s.size()), '0') + s;
}

}  // namespace

AdditionTask::AdditionTask(int digits) : digits_(digits), max_(1) {
  if (digits < 1 || digits > 9)
    throw Error(ErrorKind::Config, "addition task: digits must be in [1, 9], got " + std::to_string(digits));
  for (int i = 0; i < digits; ++i) max_ *= 10;
}

bool AdditionTask::held_out(uint64_t a, uint64_t b) { return splitmix(a * 0x100000000ull + b) % 10 == 0; }

std::string AdditionTask::prompt(uint64_t a, uint64_t b) const {
  return padded(a, digits_) + "+" + padded(b, digits_) + "=";
}

std::string AdditionTask::answer(uint64_t a, uint64_t b) const {
  std::string s = padded(a + b, digits_ + 1);
  std::reverse(s.begin(), s.end());
  return s + "\n";
}

int64_t AdditionTask::parse_answer(const std::string& text) const {
  if (static_cast<int>(text.size()) < digits_ + 1) return -1;
  int64_t v = 0;
  for (int i = digits_; i >= 0; --i) {
    if (text[i] < '0' || text[i] > '9') return -1;
    v = v * 10 + (text[i] - '0');
  }
  return v;
}

void AdditionTask::write_example(Batch& batch, int row, uint64_t a, uint64_t b) const {
  std::string s = prompt(a, b) + answer(a, b);
  const int T = seq_len();
  const int answer_from = 2 * digits_ + 2;  // index in s of the first answer byte
  for (int t = 0; t < T; ++t) {
    batch.inputs[static_cast<size_t>(row) * T + t] = static_cast<uint8_t>(s[t]);
    batch.targets[static_cast<size_t>(row) * T + t] = t + 1 >= answer_from ? static_cast<uint8_t>(s[t + 1]) : -1;
  }
}

void AdditionTask::pair(uint64_t seed, uint64_t i, bool held_out_set, uint64_t& a, uint64_t& b) const {
  // Rejection sampling from a counter-based generator: pair i does not depend on pairs before it.
  for (uint64_t attempt = 0;; ++attempt) {
    uint64_t r = splitmix(splitmix(seed ^ (i * 0x2545F4914F6CDD1Dull)) + attempt);
    a = r % max_;
    b = (r / max_) % max_;
    if (held_out(a, b) == held_out_set) return;
  }
}

AdditionLoader::AdditionLoader(const AdditionTask& task, int batch, int rank, int world, uint64_t seed)
    : task_(task), batch_(batch), rank_(rank), world_(world), seed_(seed) {
  if (batch < 1 || world < 1 || rank < 0 || rank >= world)
    throw Error(ErrorKind::Config, "addition loader: batch must be positive and 0 <= rank < world");
}

void AdditionLoader::next(Batch& batch) {
  const int T = task_.seq_len();
  batch.B = batch_, batch.T = T;
  batch.inputs.resize(static_cast<size_t>(batch_) * T);
  batch.targets.resize(batch.inputs.size());
  // Example ids of the global batch are laid out rank by rank, so ranks never share an example.
  uint64_t first = (pos_.sample * world_ + rank_) * batch_;
  for (int r = 0; r < batch_; ++r) {
    uint64_t a, b;
    task_.pair(seed_, first + r, false, a, b);
    task_.write_example(batch, r, a, b);
  }
  ++pos_.sample;
}

bool AdditionLoader::seek_from_width(const LoaderPosition& position, uint64_t saved_rows) {
  const uint64_t examples_read = position.sample * saved_rows;
  if (examples_read % rows_per_step() != 0) return false;
  pos_ = position;
  pos_.sample = examples_read / rows_per_step();
  return true;
}

double addition_accuracy(Model& model, ParamAccess& access, const AdditionTask& task, int count, int batch,
                         uint64_t seed) {
  const int T = task.seq_len(), V = model.vocab_size();
  Batch b;
  int correct = 0;
  for (int done = 0; done < count;) {
    int rows = std::min(batch, count - done);
    b.B = rows, b.T = T;
    b.inputs.resize(static_cast<size_t>(rows) * T), b.targets.resize(b.inputs.size());
    for (int r = 0; r < rows; ++r) {
      uint64_t x, y;
      task.pair(seed, static_cast<uint64_t>(done + r), true, x, y);
      task.write_example(b, r, x, y);
    }
    model.forward(b.inputs.data(), nullptr, rows, T, access);
    std::vector<float> logits = model.logits();
    for (int r = 0; r < rows; ++r) {
      bool ok = true;
      for (int t = 0; t < T && ok; ++t) {
        int32_t want = b.targets[static_cast<size_t>(r) * T + t];
        if (want < 0) continue;
        const float* z = logits.data() + (static_cast<size_t>(r) * T + t) * V;
        ok = std::max_element(z, z + V) - z == want;
      }
      correct += ok;
    }
    done += rows;
  }
  return count ? static_cast<double>(correct) / count : 0.0;
}

}  // namespace dsx::models
