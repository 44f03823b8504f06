// This rank's share of --data (see training_data.h).
#include "engine/training_data.h"

#include <algorithm>
#include <filesystem>
#include <thread>

#include "dataset/instruction_data.h"
#include "dataset/packed_text.h"
#include "dataset/shard_data.h"
#include "dsx/error.h"
#include "engine/rank_environment.h"
#include "models/data/token_loader.h"

namespace dsx::engine {

namespace {

// The tokenizer text and instruction data go through: --tokenizer, else the model folder's when it
// has one; "" means bytes (byte-level models).
std::string text_tokenizer_folder(const TrainRunOptions& o, const models::ModelSource& model) {
  if (!o.tokenizer.empty()) return o.tokenizer;
  if (model.folder.empty()) return "";
  for (const char* file : {"tokenizer.json", "tokenizer.model"}) {
    if (std::filesystem::exists(std::filesystem::path(model.folder) / file)) return model.folder;
  }
  return "";
}

// Every rank of a node encodes its data at start: they share the node's cores.
unsigned encoding_threads() {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return std::max(1u, cores / static_cast<unsigned>(local_ranks()));
}

}  // namespace

std::unique_ptr<models::DataLoader> make_loader(const TrainRunOptions& o, const models::ModelSource& model,
                                                const models::AdditionTask& task, int micro_batch, int seq_len,
                                                int rank, int world) {
  if (o.data == "addition") {
    // The built-in task is bytes: a folder with a tokenizer came to be fine-tuned on text.
    if (!model.folder.empty() && !text_tokenizer_folder(o, model).empty()) {
      throw Error(ErrorKind::Usage, "--model " + o.model + " has a tokenizer, and --data is the built-in byte-level "
                                    "addition task; give --data text:FILE, jsonl:FILE or shards:GLOB to fine-tune it");
    }
    return std::make_unique<models::AdditionLoader>(task, micro_batch, rank, world, o.seed);
  }
  models::TokenLoaderOptions t;
  t.batch = micro_batch;
  t.seq_len = seq_len;
  t.rank = rank;
  t.world = world;
  t.shuffle = true;
  t.seed = o.seed;
  if (o.data.rfind("shards:", 0) == 0) return dataset::make_shard_loader(o.data.substr(7), t);
  if (o.data.rfind("text:", 0) == 0) {
    const std::string tokenizer = text_tokenizer_folder(o, model);
    if (tokenizer.empty()) return models::TokenLoader::text(o.data.substr(5), t);
    dataset::TextDataOptions text;
    text.threads = encoding_threads();
    return dataset::make_tokenized_text_loader(o.data.substr(5), tokenizer, t, text);
  }
  if (o.data.rfind("jsonl:", 0) == 0) {
    const std::string tokenizer = text_tokenizer_folder(o, model);
    if (tokenizer.empty()) {
      throw Error(ErrorKind::Usage, "--data jsonl: needs a tokenizer: a --model folder with tokenizer files, or "
                                    "--tokenizer DIR");
    }
    return dataset::make_instruction_loader(o.data.substr(6), tokenizer, t, encoding_threads());
  }
  throw Error(ErrorKind::Usage, "--data must be addition, text:FILE, jsonl:FILE or shards:GLOB, not '" + o.data + "'");
}

}  // namespace dsx::engine
