// Streamed shards read back by models/data's reader: uint16 (GPT-2's format) and uint32 (Llama
// 3's, magic 20240801 version 7), cut at shard_tokens, no temporary file left, an unfinished
// shard never under its final name.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "dataset/shard_data.h"
#include "dataset/shard_writer.h"
#include "dsx/error.h"
#include "models/data/token_files.h"
#include "tests/models/temp_dir.h"

using namespace dsx::dataset;
using dsx::models::TokenFile;

namespace {

std::vector<int32_t> read_shard(const std::string& path) {
  auto f = TokenFile::open_shard(path);
  std::vector<int32_t> ids(f.size());
  for (size_t i = 0; i < f.size(); ++i) ids[i] = f[i];
  return ids;
}

size_t files_in(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

TEST(ShardWriter, CutsAtShardTokensAndReadsBack) {
  for (size_t width : {2u, 4u}) {
    dsx::test::TempDir dir;
    std::vector<int32_t> ids;
    for (int i = 0; i < 10; ++i) ids.push_back(width == 2 ? 65535 - i * 7 : 70000 + i * 100000000);
    ShardWriter w(dir.path(), "train", 4, width);
    w.append(std::span(ids).first(3));
    w.append(std::span(ids).subspan(3));  // crosses two shard boundaries
    w.finish();
    ASSERT_EQ(w.files().size(), 3u);
    EXPECT_EQ(w.files()[2], dir.file("train_000002.bin"));
    std::vector<int32_t> back;
    for (const auto& f : w.files()) {
      auto part = read_shard(f);
      EXPECT_LE(part.size(), 4u);
      EXPECT_EQ(TokenFile::open_shard(f).token_bytes(), width);
      back.insert(back.end(), part.begin(), part.end());
    }
    EXPECT_EQ(back, ids);
    EXPECT_EQ(files_in(dir.path()), 3u);  // no temporary file left
  }
}

TEST(ShardWriter, HeadersAreLlmcs) {
  auto gpt2 = dsx::models::token_shard_header(5, 2);
  EXPECT_EQ(gpt2.size(), 256u);
  EXPECT_EQ(gpt2[0], 20240520);
  EXPECT_EQ(gpt2[1], 1);
  EXPECT_EQ(gpt2[2], 5);
  auto llama3 = dsx::models::token_shard_header(5, 4);
  EXPECT_EQ(llama3[0], 20240801);
  EXPECT_EQ(llama3[1], 7);
  EXPECT_EQ(llama3[2], 5);
  EXPECT_EQ(dsx::models::shard_token_bytes(50257), 2u);
  EXPECT_EQ(dsx::models::shard_token_bytes(65536), 2u);
  EXPECT_EQ(dsx::models::shard_token_bytes(128256), 4u);
  EXPECT_THROW(dsx::models::token_shard_header(1ull << 31, 2), dsx::Error);
}

TEST(ShardWriter, AnUnfinishedShardNeverTakesItsFinalName) {
  dsx::test::TempDir dir;
  std::vector<int32_t> ids(6, 1);
  {
    ShardWriter w(dir.path(), "train", 4, 2);
    w.append(ids);  // one full shard, one half
    EXPECT_TRUE(std::filesystem::exists(dir.file("train_000000.bin")));
    EXPECT_FALSE(std::filesystem::exists(dir.file("train_000001.bin")));
  }  // abandoned without finish(): the half shard's temporary file goes
  EXPECT_EQ(files_in(dir.path()), 1u);
  EXPECT_EQ(read_shard(dir.file("train_000000.bin")).size(), 4u);
}

TEST(ShardWriter, IdsBeyondTheWidthAreRefused) {
  dsx::test::TempDir dir;
  ShardWriter w(dir.path(), "train", 4, 2);
  std::vector<int32_t> ids = {65536};
  EXPECT_THROW(w.append(ids), dsx::Error);
}

TEST(ShardData, VocabularyFromTokenizeJsonElseFromTheTokenWidth) {
  dsx::test::TempDir dir;
  dsx::models::TokenLoaderOptions o;
  o.batch = 1, o.seq_len = 4;
  dsx::models::write_token_shard(dir.file("gpt2_000000.bin"), std::vector<uint16_t>(20, 7));
  EXPECT_EQ(make_shard_loader(dir.file("gpt2_*.bin"), o)->vocab_size(), 50257);
  dsx::models::write_token_shard(dir.file("llama_000000.bin"), std::vector<uint32_t>(20, 100000));
  auto llama = make_shard_loader(dir.file("llama_*.bin"), o);
  EXPECT_EQ(llama->vocab_size(), 128256);
  dsx::models::Batch batch;
  llama->next(batch);
  EXPECT_EQ(batch.inputs[0], 100000);
  std::ofstream(dir.file("tokenize.json")) << "{\"vocab_size\": 804, \"token_bytes\": 2}\n";
  EXPECT_EQ(make_shard_loader(dir.file("gpt2_*.bin"), o)->vocab_size(), 804);
  std::ofstream(dir.file("tokenize.json")) << "{\"tokens\": 3}\n";
  try {
    make_shard_loader(dir.file("gpt2_*.bin"), o);
    FAIL();
  } catch (const dsx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenize.json' has no positive integer vocab_size"),
              std::string::npos)
        << e.what();
  }
}
