// llm.c's data loader over memory-mapped token files (shards or byte text). Each file is cut into
// samples of world*B*T tokens; rank r of `world` takes rows r*B*T .. (r+1)*B*T of every sample
// (plus one token for the last target), so the ranks of one global batch read disjoint windows.
// With shuffling, the file order of each epoch and the sample order within each file are seeded
// permutations, recomputed from (seed, epoch, file) so a saved position resumes exactly.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/data/loader.h"
#include "models/data/token_files.h"

namespace dsx::models {

// The words of the error a loader gives when its data holds fewer tokens than one batch; tools
// that run trial jobs (dsx autotune) recognise that failure by them.
inline constexpr const char* kFewerTokensThanOneBatch = "fewer than one global batch";

struct TokenLoaderOptions {
  int batch = 1, seq_len = 1;    // B, T of this rank's micro-batch
  int rank = 0, world = 1;       // data-parallel rank and size
  bool shuffle = false;
  uint64_t seed = 0;
};

class TokenLoader final : public DataLoader {
 public:
  // llm.c token shards matching a glob pattern (GPT-2 vocabulary, 50257).
  static std::unique_ptr<TokenLoader> shards(const std::string& pattern, const TokenLoaderOptions& options);
  // A plain text file, one token per byte (vocabulary 256).
  static std::unique_ptr<TokenLoader> text(const std::string& path, const TokenLoaderOptions& options);

  TokenLoader(std::vector<TokenFile> files, const TokenLoaderOptions& options, int vocab_size);

  void next(Batch& batch) override;
  LoaderPosition position() const override { return pos_; }
  void seek(const LoaderPosition& position) override;
  int vocab_size() const override { return vocab_size_; }
  uint64_t batches_per_epoch() const override;
  // Its shuffled windows are world x micro-batch wide: a position continues at that width only.
  uint64_t rows_per_step() const override { return static_cast<uint64_t>(opt_.world) * opt_.batch; }
  std::string describe() const override;
  size_t samples_in(size_t file) const;

 private:
  size_t file_at(uint64_t epoch, uint64_t shard) const;  // which file is the epoch's shard-th
  void load_order();                                      // sample order of the current shard

  std::vector<TokenFile> files_;
  TokenLoaderOptions opt_;
  int vocab_size_;
  LoaderPosition pos_;
  std::vector<uint64_t> sample_order_;  // empty without shuffling
};

}  // namespace dsx::models
