// The elastic batch rule (config/elastic_batch.h): train_batch_size kept across world sizes,
// accumulation recomputed, a smaller micro-batch where needed, the working sizes named otherwise.
#include <gtest/gtest.h>

#include "config/ds_config.h"
#include "config/elastic_batch.h"
#include "dsx/error.h"

using dsx::config::rebatch_for_world;
using dsx::config::worlds_keeping_batch;

TEST(ElasticBatch, SameMicroBatchWhenTheAccumulationStaysWhole) {
  // 32 = 4 x 4 x 2 on two ranks; one rank left: 4 x 8 x 1.
  auto b = rebatch_for_world(32, 4, 4, 2, 1);
  ASSERT_TRUE(b.ok()) << b.error;
  EXPECT_EQ(b.micro_batch, 4);
  EXPECT_EQ(b.accumulation, 8);
  EXPECT_EQ(b.change,
            "world 2 -> 1 ranks: micro-batch 4 -> 4, gradient accumulation 4 -> 8 "
            "(train_batch_size 32 kept)");
  // Growing: 4 x 1 x 8.
  auto g = rebatch_for_world(32, 4, 4, 2, 8);
  EXPECT_EQ(g.micro_batch, 4);
  EXPECT_EQ(g.accumulation, 1);
}

TEST(ElasticBatch, LargestSmallerMicroBatchWhenTheConfiguredOneDoesNotDivide) {
  // 24 on 3 ranks is 8 each: micro 6 does not divide 8, 4 is the largest that does.
  auto b = rebatch_for_world(24, 6, 2, 2, 3);
  ASSERT_TRUE(b.ok()) << b.error;
  EXPECT_EQ(b.micro_batch, 4);
  EXPECT_EQ(b.accumulation, 2);
  // 12 on 6 ranks is 2 each: micro 4 is more than a rank's share.
  auto c = rebatch_for_world(12, 4, 1, 3, 6);
  EXPECT_EQ(c.micro_batch, 2);
  EXPECT_EQ(c.accumulation, 1);
  // 14 on 2 ranks is 7 each, a prime: micro 1, accumulation 7.
  auto d = rebatch_for_world(14, 3, 1, 7, 2);
  EXPECT_EQ(d.micro_batch, 1);
  EXPECT_EQ(d.accumulation, 7);
  // Every result keeps the global batch, for every world that divides it.
  for (int64_t T : {12, 32, 60, 96})
    for (int64_t m : {1, 3, 4, 5})
      for (int64_t w : worlds_keeping_batch(T, T)) {
        auto r = rebatch_for_world(T, m, 1, 1, w);
        ASSERT_TRUE(r.ok());
        EXPECT_EQ(r.micro_batch * r.accumulation * w, T);
        EXPECT_LE(r.micro_batch, m);
        // No larger micro-batch <= m would have kept it.
        for (int64_t larger = r.micro_batch + 1; larger <= m; ++larger)
          EXPECT_NE((T / w) % larger, 0) << T << " " << m << " " << w;
      }
}

TEST(ElasticBatch, NoWholeNumberNamesTheWorldSizesThatWork) {
  auto b = rebatch_for_world(32, 4, 4, 2, 3);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error.find("train_batch_size 32 cannot be kept on 3 ranks"), std::string::npos)
      << b.error;
  EXPECT_NE(b.error.find("the world sizes up to 8 that keep it are 1, 2, 4, 8"), std::string::npos)
      << b.error;
  EXPECT_FALSE(rebatch_for_world(0, 4, 1, 1, 1).ok());
  EXPECT_FALSE(rebatch_for_world(8, 4, 1, 1, 0).ok());
  EXPECT_EQ(worlds_keeping_batch(12, 100), (std::vector<int64_t>{1, 2, 3, 4, 6, 12}));
}

namespace {

dsx::config::EngineConfig read_elastic(const std::string& json, int64_t world, bool elastic) {
  dsx::config::ConfigInputs in;
  in.world_size = world;
  in.keep_train_batch_size = elastic;
  return dsx::config::read_ds_config_text(json, "test.json", in);
}

const char* kWrittenForTwo =
    R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4,
        "gradient_accumulation_steps": 4, "optimizer": {"type": "AdamW"}})";

}  // namespace

TEST(ElasticBatch, AnElasticReadReCutsTheBatchKeysForTheWorld) {
  // Written for 2 ranks: as written there, re-cut on 1 rank, refused on 3 with the sizes that work.
  auto two = read_elastic(kWrittenForTwo, 2, true);
  EXPECT_EQ(two.gradient_accumulation_steps, 4);
  EXPECT_EQ(two.elastic_batch_change, "");
  auto one = read_elastic(kWrittenForTwo, 1, true);
  EXPECT_EQ(one.train_batch_size, 32);
  EXPECT_EQ(one.train_micro_batch_size_per_gpu, 4);
  EXPECT_EQ(one.gradient_accumulation_steps, 8);
  EXPECT_EQ(one.elastic_batch_change,
            "world 2 -> 1 ranks: micro-batch 4 -> 4, gradient accumulation 4 -> 8 "
            "(train_batch_size 32 kept)");
  try {
    read_elastic(kWrittenForTwo, 3, true);
    FAIL() << "32 on 3 ranks was accepted";
  } catch (const dsx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("the world sizes up to 8 that keep it are 1, 2, 4, 8"),
              std::string::npos)
        << e.what();
  }
  // Without train_batch_size there is no global batch to keep: a warning says so.
  auto unkept = read_elastic(
      R"({"train_micro_batch_size_per_gpu": 4, "optimizer": {"type": "AdamW"}})", 3, true);
  EXPECT_EQ(unkept.train_batch_size, 12);
  ASSERT_EQ(unkept.warnings.size(), 1u);
  EXPECT_NE(unkept.warnings[0].message.find("Give train_batch_size to keep it"), std::string::npos);
  // Without an elastic launch the triad stays DeepSpeed's: 32 != 4 x 4 x 1 is an error.
  EXPECT_THROW(read_elastic(kWrittenForTwo, 1, false), dsx::Error);
}
