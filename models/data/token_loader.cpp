// llm.c-style windows over token files (see token_loader.h).
#include "models/data/token_loader.h"

#include "dsx/error.h"
#include "models/data/permutation.h"

namespace dsx::models {

std::unique_ptr<TokenLoader> TokenLoader::shards(const std::string& pattern, const TokenLoaderOptions& o) {
  std::vector<TokenFile> files;
  for (const auto& path : glob_files(pattern)) files.push_back(TokenFile::open_shard(path));
  return std::make_unique<TokenLoader>(std::move(files), o, 50257);
}

std::unique_ptr<TokenLoader> TokenLoader::text(const std::string& path, const TokenLoaderOptions& o) {
  std::vector<TokenFile> files;
  files.push_back(TokenFile::open_text(path));
  return std::make_unique<TokenLoader>(std::move(files), o, 256);
}

TokenLoader::TokenLoader(std::vector<TokenFile> files, const TokenLoaderOptions& o, int vocab_size)
    : files_(std::move(files)), opt_(o), vocab_size_(vocab_size) {
  if (o.batch < 1 || o.seq_len < 1 || o.world < 1 || o.rank < 0 || o.rank >= o.world)
    throw Error(ErrorKind::Config, "data loader: batch and seq_len must be positive and 0 <= rank < world");
  for (size_t i = 0; i < files_.size(); ++i)
    if (samples_in(i) == 0)
      throw Error(ErrorKind::Format, "data file '" + files_[i].path() + "' holds " + std::to_string(files_[i].size()) +
                                         " tokens, " + kFewerTokensThanOneBatch + " (world " + std::to_string(o.world) +
                                         " x batch " + std::to_string(o.batch) + " x seq " +
                                         std::to_string(o.seq_len) + " + 1); use more data or a smaller batch");
  load_order();
}

uint64_t TokenLoader::batches_per_epoch() const {
  uint64_t total = 0;
  for (size_t f = 0; f < files_.size(); ++f) total += samples_in(f);
  return total;
}

std::string TokenLoader::describe() const {
  uint64_t tokens = 0;
  for (const TokenFile& f : files_) tokens += f.size();
  const bool bytes = files_.size() == 1 && files_[0].token_bytes() == 1;
  return (bytes ? "bytes of '" + files_[0].path() + "'" : std::to_string(files_.size()) + " token file(s)") + ", " +
         std::to_string(tokens) + " tokens, vocabulary " + std::to_string(vocab_size_) + ", " +
         std::to_string(batches_per_epoch()) + " global batches an epoch";
}

size_t TokenLoader::samples_in(size_t file) const {
  size_t window = static_cast<size_t>(opt_.world) * opt_.batch * opt_.seq_len;
  return files_[file].size() < 1 ? 0 : (files_[file].size() - 1) / window;
}

size_t TokenLoader::file_at(uint64_t epoch, uint64_t shard) const {
  if (!opt_.shuffle) return shard;
  return seeded_permutation(files_.size(), mix_seed(opt_.seed, epoch))[shard];
}

void TokenLoader::load_order() {
  sample_order_.clear();
  if (opt_.shuffle)
    sample_order_ = seeded_permutation(samples_in(file_at(pos_.epoch, pos_.shard)),
                                       mix_seed(mix_seed(opt_.seed, pos_.epoch), pos_.shard + 1));
}

void TokenLoader::seek(const LoaderPosition& p) {
  if (p.shard >= files_.size() || p.sample > samples_in(file_at(p.epoch, p.shard)))
    throw Error(ErrorKind::Format, "data loader: saved position (epoch " + std::to_string(p.epoch) + ", shard " +
                                       std::to_string(p.shard) + ", sample " + std::to_string(p.sample) +
                                       ") does not exist in this data; resume with the data and batch size of the saved run");
  pos_ = p;
  load_order();
}

void TokenLoader::next(Batch& batch) {
  size_t file = file_at(pos_.epoch, pos_.shard);
  if (pos_.sample >= samples_in(file)) {
    pos_.sample = 0;
    if (++pos_.shard == files_.size()) pos_.shard = 0, ++pos_.epoch;
    load_order();
    file = file_at(pos_.epoch, pos_.shard);
  }
  uint64_t sample = opt_.shuffle ? sample_order_[pos_.sample] : pos_.sample;
  ++pos_.sample;
  const size_t BT = static_cast<size_t>(opt_.batch) * opt_.seq_len;
  const size_t start = (sample * opt_.world + opt_.rank) * BT;
  const TokenFile& f = files_[file];
  batch.B = opt_.batch, batch.T = opt_.seq_len;
  batch.inputs.resize(BT), batch.targets.resize(BT);
  for (size_t i = 0; i < BT; ++i) {
    batch.inputs[i] = f[start + i];
    batch.targets[i] = f[start + i + 1];
  }
}

}  // namespace dsx::models
