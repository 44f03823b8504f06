// Packed text (--data text:FILE through a tokenizer): every token of the corpus once and in
// order across the rows, EOS after every document, the remainder dropped; ranks disjoint and
// together complete; a seeded order that resumes from a saved position.
#include <gtest/gtest.h>

#include <algorithm>

#include "dataset/packed_text.h"
#include "dsx/error.h"
#include "tests/dataset/dataset_test_util.h"
#include "tests/models/temp_dir.h"

using namespace dsx::dataset;
using dsx::models::Batch;
using dsx::models::TokenLoaderOptions;

namespace {

TokenLoaderOptions options(int batch, int seq, int rank = 0, int world = 1, bool shuffle = false,
                           uint64_t seed = 0) {
  TokenLoaderOptions o;
  o.batch = batch, o.seq_len = seq, o.rank = rank, o.world = world, o.shuffle = shuffle,
  o.seed = seed;
  return o;
}

// Row b of a batch as the T+1 tokens it was cut from, checking that targets are inputs shifted.
std::vector<int32_t> row_tokens(const Batch& batch, int b) {
  const size_t T = batch.T;
  std::vector<int32_t> row(batch.inputs.begin() + b * T, batch.inputs.begin() + (b + 1) * T);
  for (size_t i = 0; i + 1 < T; ++i) EXPECT_EQ(batch.targets[b * T + i], row[i + 1]);
  row.push_back(batch.targets[(b + 1) * T - 1]);
  return row;
}

struct Corpus {
  dsx::test::TempDir dir;
  std::vector<std::string> lines = dsx::test::corpus_lines(600, 11);
  std::string path = dir.file("corpus.txt");
  Corpus() { dsx::test::write_file(path, dsx::test::joined(lines)); }
};

}  // namespace

TEST(PackedText, EveryTokenOnceInOrderWithEosBetweenDocuments) {
  Corpus c;
  // llama3 and spm (SentencePiece) add a BOS to every document; qwen2 normalizes (NFC).
  for (const char* name : {"gpt2", "llama3", "qwen2", "spm"}) {
    auto tok = dsx::test::load_fixture(name);
    const auto expected = dsx::test::corpus_ids(*tok, c.lines);
    EXPECT_EQ(tokenize_text_file(*tok, c.path), expected) << name;
    const int T = 37;
    auto loader =
        make_tokenized_text_loader(c.path, *tok, options(1, T), {DocumentSplit::Lines, 2, 512});
    const size_t rows = expected.size() / (T + 1);
    ASSERT_EQ(loader->batches_per_epoch(), rows);
    EXPECT_EQ(loader->vocab_size(), tok->vocab_size());
    std::vector<int32_t> seen;
    Batch batch;
    for (size_t r = 0; r < rows; ++r) {
      loader->next(batch);
      ASSERT_EQ(batch.B, 1);
      ASSERT_EQ(batch.T, T);
      auto row = row_tokens(batch, 0);
      seen.insert(seen.end(), row.begin(), row.end());
    }
    // The rows are the corpus's ids cut in T+1 pieces; only the last partial row is left out.
    EXPECT_TRUE(std::equal(seen.begin(), seen.end(), expected.begin())) << name;
    EXPECT_LT(expected.size() - seen.size(), static_cast<size_t>(T + 1));
    const size_t docs =
        std::count_if(c.lines.begin(), c.lines.end(), [](auto& l) { return !dsx::test::blank(l); });
    EXPECT_EQ(static_cast<size_t>(std::count(expected.begin(), expected.end(), *tok->eos_id())),
              docs);
    loader->next(batch);  // the next epoch starts over
    EXPECT_EQ(loader->position().epoch, 1u);
    EXPECT_TRUE(std::equal(batch.inputs.begin(), batch.inputs.end(), expected.begin()));
  }
}

TEST(PackedText, RanksAreDisjointAndTogetherComplete) {
  Corpus c;
  auto tok = dsx::test::load_fixture("gpt2");
  const int T = 16, B = 2, world = 3;
  auto one = make_tokenized_text_loader(c.path, *tok, options(1, T));
  std::vector<std::vector<int32_t>> rows;  // every row, in order
  Batch batch;
  for (uint64_t i = 0; i < one->batches_per_epoch(); ++i)
    one->next(batch), rows.push_back(row_tokens(batch, 0));
  const uint64_t per_rank = rows.size() / (world * B);
  // In order: step s, rank r reads rows (s*world + r)*B .. +B.
  for (int rank = 0; rank < world; ++rank) {
    auto loader = make_tokenized_text_loader(c.path, *tok, options(B, T, rank, world));
    ASSERT_EQ(loader->batches_per_epoch(), per_rank);
    for (uint64_t s = 0; s < per_rank; ++s) {
      loader->next(batch);
      for (int b = 0; b < B; ++b) ASSERT_EQ(row_tokens(batch, b), rows[(s * world + rank) * B + b]);
    }
  }
  // Shuffled: the ranks' rows of one epoch are exactly the first per_rank*world*B rows, each once.
  std::vector<std::vector<int32_t>> read;
  for (int rank = 0; rank < world; ++rank) {
    auto loader = make_tokenized_text_loader(c.path, *tok, options(B, T, rank, world, true, 42));
    for (uint64_t s = 0; s < per_rank; ++s) {
      loader->next(batch);
      for (int b = 0; b < B; ++b) read.push_back(row_tokens(batch, b));
    }
  }
  std::vector<std::vector<int32_t>> expected(rows.begin(), rows.begin() + per_rank * world * B);
  EXPECT_NE(read, expected);  // shuffled
  std::sort(read.begin(), read.end()), std::sort(expected.begin(), expected.end());
  EXPECT_EQ(read, expected);
}

TEST(PackedText, ShuffleIsSeededAndResumes) {
  Corpus c;
  auto tok = dsx::test::load_fixture("gpt2");
  auto a = make_tokenized_text_loader(c.path, *tok, options(2, 8, 0, 1, true, 7));
  auto b = make_tokenized_text_loader(c.path, *tok, options(2, 8, 0, 1, true, 7));
  auto plain = make_tokenized_text_loader(c.path, *tok, options(2, 8));
  Batch x, y, z;
  bool differs = false;
  for (int i = 0; i < 10; ++i) {
    a->next(x), b->next(y), plain->next(z);
    EXPECT_EQ(x.inputs, y.inputs);
    differs |= x.inputs != z.inputs;
  }
  EXPECT_TRUE(differs);
  auto saved = a->position();
  a->next(x);
  b->seek(saved);
  b->next(y);
  EXPECT_EQ(x.inputs, y.inputs);
  EXPECT_EQ(x.targets, y.targets);
}

TEST(PackedText, TooLittleDataIsAClearError) {
  dsx::test::TempDir dir;
  dsx::test::write_file(dir.file("tiny.txt"), "hello world\n");
  auto tok = dsx::test::load_fixture("gpt2");
  try {
    make_tokenized_text_loader(dir.file("tiny.txt"), *tok, options(1, 64));
    FAIL();
  } catch (const dsx::Error& e) {
    EXPECT_NE(std::string(e.what()).find(dsx::models::kFewerTokensThanOneBatch), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("tiny.txt"), std::string::npos) << e.what();
  }
}
