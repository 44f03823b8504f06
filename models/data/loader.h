// What the training driver pulls micro-batches from. A loader serves this data-parallel rank's
// share of each global batch, B rows of T tokens with next-token targets, and can say and restore
// where it is, so a resumed run continues on the very next batch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dsx::models {

struct Batch {
  int B = 0, T = 0;
  std::vector<int32_t> inputs;   // B*T tokens
  std::vector<int32_t> targets;  // B*T next tokens; -1 marks a position that takes no part in the loss
};

// Where a loader stands: enough to continue exactly (checkpointed by the engine).
struct LoaderPosition {
  uint64_t epoch = 0;
  uint64_t shard = 0;   // index into the (possibly shuffled) shard order of the epoch
  uint64_t sample = 0;  // next sample within the shard (or batch counter for generated data)
  bool operator==(const LoaderPosition&) const = default;
};

class DataLoader {
 public:
  virtual ~DataLoader() = default;
  virtual void next(Batch& batch) = 0;
  virtual LoaderPosition position() const = 0;
  virtual void seek(const LoaderPosition& position) = 0;
  // Tokens are in [0, vocab_size()): a model with a smaller vocabulary cannot train on this data.
  virtual int vocab_size() const = 0;
  // Micro-batches this rank reads in one pass over the data; 0 for endless (generated) data.
  virtual uint64_t batches_per_epoch() const { return 0; }
  // Rows all ranks together read per position().sample step (world x micro-batch), saved with
  // a checkpoint so that a run of another width can continue; 0 when it does not apply.
  virtual uint64_t rows_per_step() const { return 0; }
  // Continues from a position saved by a run that read `saved_rows` rows per step. False when
  // this loader's order depends on that width (shuffled windows) or the rows do not divide.
  virtual bool seek_from_width(const LoaderPosition&, uint64_t /*saved_rows*/) { return false; }
  // What the data is, for the start of a run's log ("" when there is nothing to say).
  virtual std::string describe() const { return ""; }
};

}  // namespace dsx::models
