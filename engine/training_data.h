// This rank's share of `dsx train --data`: the built-in addition task, text:FILE, jsonl:FILE or
// shards:GLOB, through the model folder's tokenizer (or --tokenizer) where the data is text.
#pragma once

#include <memory>

#include "engine/train_run.h"
#include "models/data/addition.h"
#include "models/data/loader.h"
#include "models/model_source.h"

namespace dsx::engine {

// Throws dsx::Error(Usage) for a --data this model cannot take (jsonl: without a tokenizer, the
// byte-level addition task for a model folder with one).
std::unique_ptr<models::DataLoader> make_loader(const TrainRunOptions& o, const models::ModelSource& model,
                                                const models::AdditionTask& task, int micro_batch, int seq_len,
                                                int rank, int world);

}  // namespace dsx::engine
