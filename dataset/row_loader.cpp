// Rows as rank-sharded, seeded batches (see row_loader.h).
#include "dataset/row_loader.h"

#include "dsx/error.h"
#include "models/data/permutation.h"

namespace dsx::dataset {

RowLoader::RowLoader(std::unique_ptr<RowSource> source, const models::TokenLoaderOptions& o,
                     int vocab_size)
    : source_(std::move(source)), opt_(o), vocab_size_(vocab_size) {
  if (o.batch < 1 || o.seq_len < 1 || o.world < 1 || o.rank < 0 || o.rank >= o.world) {
    throw Error(ErrorKind::Config,
                "data loader: batch and seq_len must be positive and 0 <= rank < world");
  }
  if (source_->seq_len() != o.seq_len) {
    throw Error(ErrorKind::Internal,
                source_->describe() + " has rows of " + std::to_string(source_->seq_len()) +
                    " positions, the loader was asked for " + std::to_string(o.seq_len));
  }
  const uint64_t per_sample = static_cast<uint64_t>(o.world) * o.batch;
  samples_ = source_->rows() / per_sample;
  if (samples_ == 0) {
    throw Error(ErrorKind::Format,
                source_->describe() + " makes " + std::to_string(source_->rows()) + " rows, " +
                    models::kFewerTokensThanOneBatch + " (world " + std::to_string(o.world) +
                    " x batch " + std::to_string(o.batch) + " rows of seq " +
                    std::to_string(o.seq_len) + "); use more data or a smaller batch or seq_len");
  }
  load_order();
}

void RowLoader::load_order() {
  order_.clear();
  if (opt_.shuffle) {
    order_ = models::seeded_permutation(samples_, models::mix_seed(opt_.seed, pos_.epoch));
  }
}

void RowLoader::seek(const models::LoaderPosition& p) {
  if (p.shard != 0 || p.sample > samples_) {
    throw Error(ErrorKind::Format,
                "data loader: saved position (epoch " + std::to_string(p.epoch) + ", shard " +
                    std::to_string(p.shard) + ", sample " + std::to_string(p.sample) +
                    ") does not exist in " + source_->describe() +
                    "; resume with the data, seq_len and batch size of the saved run");
  }
  pos_ = p;
  load_order();
}

void RowLoader::next(models::Batch& batch) {
  if (pos_.sample >= samples_) {
    pos_.sample = 0, ++pos_.epoch;
    load_order();
  }
  const uint64_t sample = opt_.shuffle ? order_[pos_.sample] : pos_.sample;
  ++pos_.sample;
  const size_t T = static_cast<size_t>(opt_.seq_len);
  batch.B = opt_.batch, batch.T = opt_.seq_len;
  batch.inputs.resize(static_cast<size_t>(opt_.batch) * T),
      batch.targets.resize(batch.inputs.size());
  const uint64_t first = (sample * opt_.world + opt_.rank) * opt_.batch;
  for (int b = 0; b < opt_.batch; ++b) {
    source_->row(first + b, batch.inputs.data() + b * T, batch.targets.data() + b * T);
  }
}

std::string RowLoader::describe() const {
  return source_->describe() + ": " + std::to_string(source_->rows()) + " rows of " +
         std::to_string(source_->seq_len()) + " tokens, vocabulary " + std::to_string(vocab_size_) + ", " +
         std::to_string(samples_) + " global batches an epoch";
}

}  // namespace dsx::dataset
