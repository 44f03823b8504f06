// Data loaders: llm.c token shards split by rank, epochs, seeded shuffling and exact resume;
// byte text; the addition task's format, held-out split and learnability.
#include <cblas.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <fstream>
#include <set>

#include "dsx/error.h"
#include "models/data/addition.h"
#include "models/data/token_loader.h"
#include "models/gpt2/gpt2_cpu.h"
#include "models/local_params.h"
#include "tests/models/plain_adamw.h"
#include "tests/models/temp_dir.h"

using namespace dsx::models;

namespace {

// Shard k holds tokens base_k, base_k + 1, ...: every token tells where it came from.
std::vector<std::string> write_shards(const dsx::test::TempDir& dir, int count, int tokens) {
  std::vector<std::string> paths;
  for (int k = 0; k < count; ++k) {
    std::vector<uint16_t> t(tokens);
    for (int i = 0; i < tokens; ++i) t[i] = static_cast<uint16_t>(k * 1000 + i);
    paths.push_back(dir.file("train_" + std::to_string(k) + ".bin"));
    write_token_shard(paths.back(), t);
  }
  return paths;
}

}  // namespace

TEST(TokenLoader, RanksReadDisjointWindowsWithShiftedTargets) {
  dsx::test::TempDir dir;
  write_shards(dir, 1, 101);
  TokenLoaderOptions o{2, 5, 0, 2, false, 0};
  auto r0 = TokenLoader::shards(dir.file("train_*.bin"), o);
  o.rank = 1;
  auto r1 = TokenLoader::shards(dir.file("train_*.bin"), o);
  EXPECT_EQ(r0->samples_in(0), 5u);  // (101 - 1) / (2 ranks * 2 * 5)
  Batch a, b;
  for (int step = 0; step < 5; ++step) {
    r0->next(a);
    r1->next(b);
    // llm.c: sample s of rank r starts at token (s * world + r) * B * T.
    EXPECT_EQ(a.inputs[0], (step * 2 + 0) * 10);
    EXPECT_EQ(b.inputs[0], (step * 2 + 1) * 10);
    for (int i = 0; i < 10; ++i) {
      EXPECT_EQ(a.targets[i], a.inputs[i] + 1);
      EXPECT_EQ(b.inputs[i], a.inputs[i] + 10);
    }
  }
  r0->next(a);  // epoch 2 starts over
  EXPECT_EQ(a.inputs[0], 0);
  EXPECT_EQ(r0->position().epoch, 1u);
}

TEST(TokenLoader, ShuffleIsSeededCoversEverySampleAndResumesExactly) {
  dsx::test::TempDir dir;
  write_shards(dir, 3, 81);  // 10 samples of B*T = 8 per shard
  TokenLoaderOptions o{2, 4, 0, 1, true, 99};
  auto loader = TokenLoader::shards(dir.file("train_*.bin"), o);
  std::set<int32_t> starts;
  std::vector<int32_t> first_epoch;
  Batch b;
  for (int i = 0; i < 30; ++i) {
    loader->next(b);
    starts.insert(b.inputs[0]);
    first_epoch.push_back(b.inputs[0]);
  }
  EXPECT_EQ(starts.size(), 30u);  // every sample of every shard exactly once
  std::vector<int32_t> in_order;
  for (int k = 0; k < 3; ++k)
    for (int s = 0; s < 10; ++s) in_order.push_back(k * 1000 + s * 8);
  EXPECT_NE(first_epoch, in_order);

  // Same seed, same order; a saved position continues with the very next batch.
  auto again = TokenLoader::shards(dir.file("train_*.bin"), o);
  for (int i = 0; i < 17; ++i) again->next(b);
  LoaderPosition saved = again->position();
  std::vector<int32_t> expected;
  for (int i = 0; i < 20; ++i) {
    again->next(b);
    expected.push_back(b.inputs[0]);
  }
  auto resumed = TokenLoader::shards(dir.file("train_*.bin"), o);
  resumed->seek(saved);
  for (int i = 0; i < 20; ++i) {
    resumed->next(b);
    EXPECT_EQ(b.inputs[0], expected[i]) << i;
  }
  // The second epoch is shuffled differently from the first.
  EXPECT_NE(std::vector<int32_t>(expected.begin() + 13, expected.end()),
            std::vector<int32_t>(first_epoch.begin(), first_epoch.begin() + 7));
  EXPECT_THROW(resumed->seek(LoaderPosition{0, 7, 0}), dsx::Error);
}

TEST(TokenLoader, BadShardsAreRejected) {
  dsx::test::TempDir dir;
  auto paths = write_shards(dir, 1, 50);
  std::string raw;
  {
    std::ifstream in(paths[0], std::ios::binary);
    raw.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto expect_format = [&](const std::string& bytes, const std::string& needle) {
    std::ofstream(dir.file("bad.bin"), std::ios::binary) << bytes;
    try {
      TokenFile::open_shard(dir.file("bad.bin"));
      ADD_FAILURE() << "accepted " << needle;
    } catch (const dsx::Error& e) {
      EXPECT_EQ(e.kind(), dsx::ErrorKind::Format);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_format(raw.substr(0, raw.size() - 2), "truncated");
  // issue 33, item 22: a longer file is not "truncated".
  expect_format(raw + "xyzw", "4 bytes more than the header's tokens");
  std::string v = raw;
  v[4] = 7;
  expect_format(v, "version 7");
  std::string m = raw;
  m[1] = 0;
  expect_format(m, "magic");
  expect_format("short", "shorter");
  TokenLoaderOptions big{4, 16, 0, 1, false, 0};  // 64 tokens per batch > 49 available
  EXPECT_THROW(TokenLoader::shards(paths[0], big), dsx::Error);
  EXPECT_THROW(TokenLoader::shards(dir.file("nothing_*.bin"), big), dsx::Error);
}

TEST(TokenLoader, TextIsReadAsBytes) {
  dsx::test::TempDir dir;
  std::ofstream(dir.file("t.txt")) << "hello, world! \xc3\xa9";
  auto loader = TokenLoader::text(dir.file("t.txt"), TokenLoaderOptions{1, 5, 0, 1, false, 0});
  EXPECT_EQ(loader->vocab_size(), 256);
  Batch b;
  loader->next(b);
  EXPECT_EQ(b.inputs, (std::vector<int32_t>{'h', 'e', 'l', 'l', 'o'}));
  EXPECT_EQ(b.targets.back(), ',');
  loader->next(b);
  loader->next(b);  // "ld! \xc3" -> "d! \xc3\xa9": bytes, not characters
  EXPECT_EQ(b.inputs.back(), 0xc3);
  EXPECT_EQ(b.targets.back(), 0xa9);
}

TEST(AdditionTask, FormatMaskHeldOutAndRanks) {
  AdditionTask task(2);
  EXPECT_EQ(task.prompt(7, 35), "07+35=");
  EXPECT_EQ(task.answer(7, 35), "240\n");  // 042 written least significant digit first
  EXPECT_EQ(task.parse_answer("240\n"), 42);
  EXPECT_EQ(task.parse_answer("2x"), -1);
  Batch b;
  b.inputs.resize(9), b.targets.resize(9);
  task.write_example(b, 0, 7, 35);
  EXPECT_EQ(task.seq_len(), 9);
  // inputs "07+35=240", targets: -1 until the answer, then "240\n".
  EXPECT_EQ(b.inputs[5], '=');
  EXPECT_EQ(b.targets[4], -1);
  EXPECT_EQ(b.targets[5], '2');
  EXPECT_EQ(b.targets[8], '\n');

  AdditionLoader r0(task, 16, 0, 2, 5), r1(task, 16, 1, 2, 5);
  std::set<std::pair<int, int>> seen0;
  int held = 0;
  for (int step = 0; step < 200; ++step) {
    r0.next(b);
    for (int r = 0; r < 16; ++r) {
      int x = (b.inputs[r * 9] - '0') * 10 + (b.inputs[r * 9 + 1] - '0');
      int y = (b.inputs[r * 9 + 3] - '0') * 10 + (b.inputs[r * 9 + 4] - '0');
      held += AdditionTask::held_out(x, y);
      seen0.insert({x, y});
    }
  }
  EXPECT_EQ(held, 0);  // never trains on the held-out pairs
  EXPECT_GT(seen0.size(), 2500u);  // of the 9000 training pairs, from 3200 draws
  Batch c;
  r0.seek(LoaderPosition{});
  r0.next(b);
  r1.next(c);
  EXPECT_NE(b.inputs, c.inputs);  // ranks draw different examples
  int held_pairs = 0;
  for (int x = 0; x < 100; ++x)
    for (int y = 0; y < 100; ++y) held_pairs += AdditionTask::held_out(x, y);
  EXPECT_NEAR(held_pairs, 1000, 100);
  EXPECT_THROW(AdditionTask(0), dsx::Error);
}

// An elastic restart: 3 steps on 2 ranks of 4 rows, then one rank continues with the very
// examples the 2-rank run would have read next (rank 0's, then rank 1's), none twice or skipped.
TEST(AdditionTask, ContinuesAtAnotherWorldSizeWithoutRepeatingOrSkipping) {
  AdditionTask task(2);
  AdditionLoader r0(task, 4, 0, 2, 5), r1(task, 4, 1, 2, 5), alone(task, 4, 0, 1, 5);
  Batch b, expected0, expected1;
  for (int step = 0; step < 3; ++step) r0.next(b), r1.next(b);
  const LoaderPosition saved = r0.position();
  EXPECT_EQ(r0.rows_per_step(), 8u);
  r0.next(expected0);
  r1.next(expected1);
  ASSERT_TRUE(alone.seek_from_width(saved, 8));
  EXPECT_EQ(alone.position().sample, 6u);  // 24 examples read, 4 a step
  alone.next(b);
  EXPECT_EQ(b.inputs, expected0.inputs);
  alone.next(b);
  EXPECT_EQ(b.inputs, expected1.inputs);
  // 3 rows a step continue after 24 examples (step 8), not after 8.
  AdditionLoader three(task, 3, 0, 1, 5);
  EXPECT_TRUE(three.seek_from_width(saved, 8));
  EXPECT_FALSE(three.seek_from_width(LoaderPosition{0, 0, 1}, 8));
}

// The default data of the main job must be learnable by the tiny model in seconds. One thread,
// as each rank of the 2-rank main job on a 2-core machine has.
TEST(AdditionTask, TinyModelLearnsToAddHeldOutPairs) {
  omp_set_num_threads(1);
  openblas_set_num_threads(1);
  AdditionTask task(2);
  const int B = 32;
  GPT2Cpu<float> model(gpt2_preset("byte-tiny"), B, task.seq_len());
  LocalParams<float> p(model);
  model.init_params(p.params(), 1);
  AdditionLoader loader(task, B, 0, 1, 7);
  dsx::test::PlainAdamW adam(p.size(), 3e-3f);
  double before = addition_accuracy(model, p, task, 200, B);
  Batch b;
  float first = 0, last = 0;
  for (int step = 0; step < 800; ++step) {
    loader.next(b);
    last = adam.train_step(model, p, b.inputs.data(), b.targets.data(), B, b.T);
    if (step == 0) first = last;
  }
  double after = addition_accuracy(model, p, task, 200, B);
  EXPECT_LT(before, 0.02);
  EXPECT_GT(after, 0.7) << "loss " << first << " -> " << last;
  EXPECT_LT(last, 0.2f * first);
}
