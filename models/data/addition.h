// The built-in synthetic task, default data of the main job: D-digit addition in bytes,
// "123+456=9750\n" — operands zero-padded to D digits, the sum written least significant digit
// first in D+1 digits (the order a carry flows, which a small transformer learns far faster).
// Only the answer and the newline count in the loss. One pair in ten (by a hash of the pair)
// is held out and never trained on; accuracy on it shows whether the model learned to add.
#pragma once

#include <cstdint>
#include <string>

#include "models/data/loader.h"
#include "models/model.h"

namespace dsx::models {

class AdditionTask {
 public:
  explicit AdditionTask(int digits = 2);  // 1..9; 2 is learned by byte-tiny in ~15 s on one core
  int digits() const { return digits_; }
  int seq_len() const { return 3 * digits_ + 3; }  // T: the example minus its last byte
  uint64_t max_operand() const { return max_; }

  static bool held_out(uint64_t a, uint64_t b);
  std::string prompt(uint64_t a, uint64_t b) const;  // "123+456="
  std::string answer(uint64_t a, uint64_t b) const;  // "9750\n"
  // Reads the sum back from the model's answer text (reversed digits); -1 when malformed.
  int64_t parse_answer(const std::string& text) const;

  // Writes row `row` of a batch (inputs, targets with -1 outside the answer) for a, b.
  void write_example(Batch& batch, int row, uint64_t a, uint64_t b) const;
  // The i-th pair of a seeded stream drawn from the training pairs or the held-out ones.
  void pair(uint64_t seed, uint64_t i, bool held_out_set, uint64_t& a, uint64_t& b) const;

 private:
  int digits_;
  uint64_t max_;  // 10^digits
};

// This rank's share of an endless seeded stream of training examples; position().sample counts
// the batches served, so resuming is exact.
class AdditionLoader final : public DataLoader {
 public:
  AdditionLoader(const AdditionTask& task, int batch, int rank, int world, uint64_t seed);
  void next(Batch& batch) override;
  LoaderPosition position() const override { return pos_; }
  void seek(const LoaderPosition& position) override { pos_ = position; }
  int vocab_size() const override { return 256; }
  uint64_t rows_per_step() const override { return static_cast<uint64_t>(world_) * batch_; }
  // Examples are numbered globally, so another world or micro-batch continues at the same one.
  bool seek_from_width(const LoaderPosition& position, uint64_t saved_rows) override;

 private:
  AdditionTask task_;
  int batch_, rank_, world_;
  uint64_t seed_;
  LoaderPosition pos_;
};

// Exact-match accuracy on `count` held-out pairs (fixed by the seed), in batches of up to
// `batch` rows. Uses teacher forcing: an answer counts when every answer byte is the model's
// argmax, which is exactly when greedy decoding would produce it.
double addition_accuracy(Model& model, ParamAccess& access, const AdditionTask& task, int count,
                         int batch, uint64_t seed = 1234);

}  // namespace dsx::models
