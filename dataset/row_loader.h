// A DataLoader over fixed rows of seq_len positions (packed text, instruction examples), served
// as models/data's TokenLoader serves windows: a global batch is `world * batch` consecutive
// rows of the epoch's order and rank r takes rows r*batch .. (r+1)*batch of it, so the ranks of
// one step read disjoint rows and together every row. Rows that do not fill a last global batch
// are left out of the epoch. With shuffling, each epoch's order of global batches is a seeded
// permutation recomputed from (seed, epoch), so a saved position resumes exactly.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/data/loader.h"
#include "models/data/token_loader.h"

namespace dsx::dataset {

// What a RowLoader reads: `rows()` rows, each of seq_len() inputs and targets (-1: no loss).
class RowSource {
 public:
  virtual ~RowSource() = default;
  virtual size_t rows() const = 0;
  virtual int seq_len() const = 0;
  virtual void row(size_t index, int32_t* inputs, int32_t* targets) const = 0;
  // For errors: "packed text 'FILE' (1234 tokens)".
  virtual std::string describe() const = 0;
};

class RowLoader final : public models::DataLoader {
 public:
  // Error(Config) for bad options or a seq_len other than the source's; Error(Format) with
  // models::kFewerTokensThanOneBatch when the source has fewer rows than one global batch.
  RowLoader(std::unique_ptr<RowSource> source, const models::TokenLoaderOptions& options,
            int vocab_size);

  void next(models::Batch& batch) override;
  models::LoaderPosition position() const override { return pos_; }
  void seek(const models::LoaderPosition& position) override;
  int vocab_size() const override { return vocab_size_; }
  uint64_t batches_per_epoch() const override { return samples_; }
  // Shuffled per world x micro-batch: a position continues at that width only (elastic resumes).
  uint64_t rows_per_step() const override { return static_cast<uint64_t>(opt_.world) * opt_.batch; }
  std::string describe() const override;

  const RowSource& source() const { return *source_; }

 private:
  void load_order();

  std::unique_ptr<RowSource> source_;
  models::TokenLoaderOptions opt_;
  int vocab_size_;
  uint64_t samples_;  // global batches per epoch
  models::LoaderPosition pos_;
  std::vector<uint64_t> order_;  // empty without shuffling
};

}  // namespace dsx::dataset
