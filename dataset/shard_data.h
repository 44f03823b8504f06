// --data shards:GLOB with the vocabulary the shards were written for. `dsx tokenize` leaves
// tokenize.json beside its shards (vocab_size among it); llm.c's own shards have none, and then
// the header says which tokenizer wrote them: uint16 shards are GPT-2's (50257), uint32 shards
// Llama 3's (128256), as llm.c's dev/data scripts make them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/data/token_loader.h"

namespace dsx::dataset {

struct ShardVocabulary {
  int vocab_size = 50257;
  std::string source;  // "DIR/tokenize.json", or "llm.c GPT-2 shards (uint16)" / "(uint32)"
};

// From tokenize.json in the folder of the first shard, else from its token width.
// Error(Format) naming tokenize.json when it is there but unreadable or lacks vocab_size.
ShardVocabulary shard_vocabulary(const std::vector<std::string>& shard_files);

// models::TokenLoader over the shards matching `pattern`, with that vocabulary.
std::unique_ptr<models::TokenLoader> make_shard_loader(const std::string& pattern,
                                                       const models::TokenLoaderOptions& options);

}  // namespace dsx::dataset
