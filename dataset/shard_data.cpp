// The vocabulary of token shards (see shard_data.h).
#include "dataset/shard_data.h"

#include <rapidjson/document.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "dsx/error.h"
#include "dsx/json_input.h"
#include "models/data/token_files.h"

namespace dsx::dataset {

ShardVocabulary shard_vocabulary(const std::vector<std::string>& shard_files) {
  if (shard_files.empty()) {
    throw Error(ErrorKind::Internal, "shard_vocabulary: no shard files");
  }
  const std::filesystem::path info =
      std::filesystem::path(shard_files.front()).parent_path() / "tokenize.json";
  if (std::filesystem::exists(info)) {
    const rapidjson::Document d = parse_json(read_bounded_file(info.string()), info.string());
    if (!d.IsObject() || !d.HasMember("vocab_size") ||
        !d["vocab_size"].IsInt() || d["vocab_size"].GetInt() < 1) {
      throw Error(ErrorKind::Format,
                  "'" + info.string() +
                      "' has no positive integer vocab_size; it is what dsx "
                      "tokenize writes beside its shards: rerun it or remove the file");
    }
    return {d["vocab_size"].GetInt(), info.string()};
  }
  if (models::TokenFile::open_shard(shard_files.front()).token_bytes() == 4) {
    return {128256, "llm.c Llama 3 shards (uint32)"};
  }
  return {50257, "llm.c GPT-2 shards (uint16)"};
}

std::unique_ptr<models::TokenLoader> make_shard_loader(const std::string& pattern,
                                                       const models::TokenLoaderOptions& options) {
  const auto paths = models::glob_files(pattern);
  const ShardVocabulary vocabulary = shard_vocabulary(paths);
  std::vector<models::TokenFile> files;
  files.reserve(paths.size());
  for (const auto& path : paths) {
    files.push_back(models::TokenFile::open_shard(path));
  }
  return std::make_unique<models::TokenLoader>(std::move(files), options, vocabulary.vocab_size);
}

}  // namespace dsx::dataset
