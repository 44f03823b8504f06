// `dsx sample` as a user meets it: greedy text from a weights file equals the library's own
// generation, addition questions and held-out accuracy are answered, bad input is a clear error.
#include <gtest/gtest.h>

#include "models/gpt2/gpt2_cpu.h"
#include "models/io/gpt2_weights.h"
#include "models/local_params.h"
#include "models/sampling.h"
#include "tests/models/temp_dir.h"
#include "tests/tools/run_command.h"

using namespace dsx::models;
using dsx::test::run_dsx;

namespace {

// A byte-tiny model with random weights, written in both formats.
struct TinyWeights {
  dsx::test::TempDir dir;
  GPT2Config config = gpt2_preset("byte-tiny");
  std::vector<float> params;
  TinyWeights() {
    GPT2Cpu<float> m(config, 1, 1);
    params.resize(m.num_params());
    m.init_params(params.data(), 8);
    for (size_t i = 0; i < params.size(); ++i) params[i] *= 20.0f;  // confident, varied predictions
    write_gpt2_safetensors(dir.file("tiny.safetensors"), config, params.data());
    write_llmc_checkpoint(dir.file("tiny.bin"), config, params.data());
  }
};

}  // namespace

TEST(DsxSample, GreedyTextMatchesTheLibrary) {
  TinyWeights w;
  GPT2Cpu<float> model(w.config, 1, 20);
  LocalParams<float> p(model);
  std::copy(w.params.begin(), w.params.end(), p.params());
  SampleOptions o;
  o.max_new_tokens = 12, o.temperature = 0.0f;
  std::string prompt = "hello";
  auto out = generate(model, p, std::vector<int32_t>(prompt.begin(), prompt.end()), o);
  std::string expected(out.begin(), out.end());
  for (const char* file : {"tiny.safetensors", "tiny.bin"}) {
    auto r = run_dsx("sample " + w.dir.file(file) + " --prompt hello --tokens 12 --temperature 0");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output, expected + "\n") << file;
  }
  // Sampling with a seed is reproducible.
  auto a = run_dsx("sample " + w.dir.file("tiny.bin") + " --tokens 20 --seed 5 --top-k 10");
  auto b = run_dsx("sample " + w.dir.file("tiny.bin") + " --tokens 20 --seed 5 --top-k 10");
  EXPECT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(a.output, b.output);
}

TEST(DsxSample, AnswersAdditionAndReportsAccuracy) {
  TinyWeights w;
  auto r = run_dsx("sample " + w.dir.file("tiny.bin") + " --add 57+38");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("57 + 38 = "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the sum is 95"), std::string::npos) << r.output;  // an untrained model is wrong
  r = run_dsx("sample " + w.dir.file("tiny.bin") + " --eval-add 50");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("held-out addition accuracy: 0% of 50 problems"), std::string::npos) << r.output;
}

TEST(DsxSample, BadInputIsAClearError) {
  TinyWeights w;
  auto r = run_dsx("sample " + w.dir.file("missing.bin"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("cannot open"), std::string::npos) << r.output;
  r = run_dsx("sample " + w.dir.file("tiny.bin") + " --add 5+x");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--add takes A+B"), std::string::npos) << r.output;
  r = run_dsx("sample " + w.dir.file("tiny.bin") + " --prompt-tokens 300");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("outside the vocabulary"), std::string::npos) << r.output;
  r = run_dsx("sample");
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

// issue 33, item 22: the help shows --prompt's default (a newline) escaped, on one line.
TEST(DsxSample, HelpShowsThePromptDefaultOnOneLine) {
  auto r = run_dsx("sample --help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--prompt arg (=\"\\n\")"), std::string::npos) << r.output;
}
