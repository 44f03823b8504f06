// The batch triad (ref/ds_config.md §2) for data-parallel world sizes 1, 2, 3 and 8: every
// combination of given keys, DeepSpeed's worked examples, and the order of its checks.
#include "config/batch.h"
#include "tests/config/config_test_util.h"

using namespace dsx::test;
using dsx::config::solve_batch_triad;

namespace {

std::string batch_json(std::optional<int64_t> T, std::optional<int64_t> M, std::optional<int64_t> G) {
  std::string s = "{";
  auto add = [&](const char* k, std::optional<int64_t> v) {
    if (!v) return;
    if (s.size() > 1) s += ",";
    s += '"';
    s += k;
    s += "\":" + std::to_string(*v);
  };
  add("train_batch_size", T);
  add("train_micro_batch_size_per_gpu", M);
  add("gradient_accumulation_steps", G);
  return s + ", \"optimizer\": {\"type\": \"AdamW\"}}";
}

}  // namespace

TEST(ConfigTriad, DerivesTheMissingKeysForWorldSizes1238) {
  for (int64_t W : {1, 2, 3, 8}) {
    SCOPED_TRACE("W=" + std::to_string(W));
    // M and G given: T = M * G * W.
    auto a = read_text(batch_json(std::nullopt, 4, 2), W);
    EXPECT_EQ(a.train_batch_size, 8 * W);
    // M only: G = 1, T = M * W.
    auto b = read_text(batch_json(std::nullopt, 3, std::nullopt), W);
    EXPECT_EQ(b.train_batch_size, 3 * W);
    EXPECT_EQ(b.gradient_accumulation_steps, 1);
    // T only (a multiple of W): M = T / W.
    auto c = read_text(batch_json(24 * W, std::nullopt, std::nullopt), W);
    EXPECT_EQ(c.train_micro_batch_size_per_gpu, 24);
    EXPECT_EQ(c.gradient_accumulation_steps, 1);
    // T and M: G = (T / M) / W.
    auto d = read_text(batch_json(16 * W, 4, std::nullopt), W);
    EXPECT_EQ(d.gradient_accumulation_steps, 4);
    // T and G: M = (T / W) / G.
    auto e = read_text(batch_json(12 * W, std::nullopt, 3), W);
    EXPECT_EQ(e.train_micro_batch_size_per_gpu, 4);
    // All three, consistent.
    auto f = read_text(batch_json(2 * 5 * W, 2, 5), W);
    EXPECT_EQ(f.train_batch_size, 10 * W);
    EXPECT_EQ(f.dp_world_size, W);
  }
}

TEST(ConfigTriad, InconsistentTriplesNameTheProduct) {
  for (int64_t W : {1, 2, 3, 8}) {
    SCOPED_TRACE("W=" + std::to_string(W));
    auto e = text_error(batch_json(7 * W + 1, 7, 1), W);
    EXPECT_CONTAINS(e, std::to_string(7 * W + 1) + " != 7 * 1 * " + std::to_string(W));
    EXPECT_CONTAINS(e, "give two of the three");
  }
}

TEST(ConfigTriad, DeepSpeedWorkedExamples) {
  struct Row {
    std::optional<int64_t> T, M, G;
    int64_t W;
    int64_t eT, eM, eG;     // expected when ok
    const char* error;      // expected message fragment, or nullptr
  };
  const Row rows[] = {
      {32, {}, {}, 4, 32, 8, 1, nullptr},
      {{}, 4, {}, 8, 32, 4, 1, nullptr},
      {64, 4, {}, 4, 64, 4, 4, nullptr},
      {64, {}, 2, 4, 64, 8, 2, nullptr},
      {{}, 2, 8, 3, 48, 2, 8, nullptr},
      {30, 4, {}, 2, 0, 0, 0, "30 != 4 * 3 * 2"},  // G = (30 // 4) // 2 = 3
      {8, 16, {}, 1, 0, 0, 0, "Gradient accumulation steps: 0 has to be greater than 0"},
      {2, {}, {}, 4, 0, 0, 0, "Micro batch size per gpu: 0 has to be greater than 0"},
      {32, 4, 2, 2, 0, 0, 0, "32 != 4 * 2 * 2"},
      {24, 4, {}, 4, 0, 0, 0, "24 != 4 * 1 * 4"},
      {0, {}, {}, 1, 0, 0, 0, "Train batch size: 0 has to be greater than 0"},
      {{}, {}, 4, 1, 0, 0, 0, "Either train_batch_size or train_micro_batch_size_per_gpu"},
  };
  for (const auto& r : rows) {
    auto b = dsx::config::solve_batch_triad(r.T, r.M, r.G, r.W);
    if (r.error) {
      EXPECT_CONTAINS(b.error, r.error);
    } else {
      ASSERT_TRUE(b.ok()) << b.error;
      EXPECT_EQ(b.train_batch_size, r.eT);
      EXPECT_EQ(b.train_micro_batch_size_per_gpu, r.eM);
      EXPECT_EQ(b.gradient_accumulation_steps, r.eG);
    }
  }
}

TEST(ConfigTriad, FloorDivisionNeverRoundsUp) {
  auto b = dsx::config::solve_batch_triad(10, std::nullopt, std::nullopt, 3);  // M = 3, 3*1*3 = 9 != 10
  EXPECT_CONTAINS(b.error, "10 != 3 * 1 * 3");
}

TEST(ConfigTriad, HugeValuesDoNotOverflow) {
  auto b = dsx::config::solve_batch_triad(std::nullopt, int64_t{1} << 62, 8, 8);
  EXPECT_CONTAINS(b.error, "does not fit in 64 bits");
}

// Values the engine cannot hold are errors at their place in the file, never wrapped: 2^32 + 1
// must not train with micro-batch 1, 2^31 must not fail later blaming something else.
TEST(ConfigTriad, ValuesPastWhatTheEngineHoldsAreRefusedWhereTheyAre) {
  for (const char* key : {"train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "train_batch_size"}) {
    for (const char* value : {"4294967297", "2147483648"}) {
      SCOPED_TRACE(std::string(key) + " = " + value);
      const std::string text = std::string(R"({"optimizer": {"type": "AdamW"}, ")") + key + "\": " + value + "}";
      const std::string e = text_error(text);
      EXPECT_CONTAINS(e, key);
      EXPECT_CONTAINS(e, "must be at most 2147483647");
      EXPECT_CONTAINS(e, ":1:");  // where: line 1 of the file
    }
  }
  EXPECT_EQ(read_text(R"({"optimizer": {"type": "AdamW"}, "train_micro_batch_size_per_gpu": 2147483647})")
                .train_micro_batch_size_per_gpu,
            2147483647);
}

TEST(ConfigTriad, SequenceParallelDividesTheWorld) {
  auto c = read_case("rule_sequence_parallel");  // world size 8
  EXPECT_EQ(c.dp_world_size, 4);
  EXPECT_EQ(c.train_batch_size, 8);
  EXPECT_CONTAINS(text_error(R"({"train_micro_batch_size_per_gpu": 2, "sequence_parallel_size": 3})", 8),
                  "not a multiple of sequence_parallel_size 3");
}

TEST(ConfigTriad, FlagsFillAutoAndConflictWithNumbers) {
  dsx::config::ConfigInputs in;
  in.world_size = 2;
  in.micro_batch = 4;
  in.grad_accum = 3;
  auto c = dsx::config::read_ds_config_text(
      R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto", "optimizer": {"type": "AdamW"}})",
      "t.json", in);
  EXPECT_EQ(c.train_batch_size, 24);
  EXPECT_EQ(c.origin("train_batch_size").source, dsx::config::Source::Auto);
  EXPECT_EQ(c.origin("train_micro_batch_size_per_gpu").note, "--micro-batch");
  EXPECT_TRUE(c.warnings.empty()) << "\"auto\" keys are filled without a word";
  // A key the file does not have is filled too, and said: Hugging Face would leave it default.
  auto absent = dsx::config::read_ds_config_text(
      R"({"train_micro_batch_size_per_gpu": "auto", "optimizer": {"type": "AdamW"}})", "t.json", in);
  EXPECT_EQ(absent.gradient_accumulation_steps, 3);
  ASSERT_EQ(absent.warnings.size(), 1u);
  EXPECT_EQ(absent.warnings[0].path, "gradient_accumulation_steps");
  EXPECT_CONTAINS(absent.warnings[0].message, "not in the file: --grad-accum 3 fills it");
  auto e = error_of([&] {
    dsx::config::read_ds_config_text(R"({"train_micro_batch_size_per_gpu": 8})", "t.json", in);
  });
  EXPECT_CONTAINS(e, "the file says 8 but --micro-batch says 4");
  // "auto" batch keys without flags: the triad still needs one of T or M.
  EXPECT_CONTAINS(text_error(R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto"})"),
                  "pass --micro-batch");
}
