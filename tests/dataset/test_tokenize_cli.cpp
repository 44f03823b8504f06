// `dsx tokenize` as a user meets it: the shards read back with models/data's reader hold exactly
// the tokenizer's ids for each document with EOS after each, whatever the chunk size (the corpus
// is many chunks); a validation share; a killed run leaves only whole shards; clear errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "dataset/shard_data.h"
#include "models/data/token_files.h"
#include "tests/dataset/dataset_test_util.h"
#include "tests/models/temp_dir.h"
#include "tests/tools/run_command.h"

using dsx::test::run_command;
using dsx::test::run_dsx;

namespace {

std::vector<int32_t> read_shards(const std::string& pattern) {
  std::vector<int32_t> ids;
  for (const auto& path : dsx::models::glob_files(pattern)) {
    auto f = dsx::models::TokenFile::open_shard(path);
    for (size_t i = 0; i < f.size(); ++i) ids.push_back(f[i]);
  }
  return ids;
}

struct Inputs {
  dsx::test::TempDir dir;
  std::vector<std::string> lines = dsx::test::corpus_lines(4000, 5);
  std::vector<std::string> json_texts = {"first \"quoted\" doc\nwith two lines", "naïve café",
                                         "x+y = 123"};
  Inputs() {
    dsx::test::write_file(dir.file("a.txt"), dsx::test::joined(lines));
    dsx::test::write_file(dir.file("b.jsonl"),
                          "{\"text\": \"first \\\"quoted\\\" doc\\nwith two lines\", \"id\": 1}\n\n"
                          "{\"text\": \"na\\u00efve caf\\u00e9\"}\n{\"text\": \"x+y = 123\"}\n");
  }
  std::vector<int32_t> expected(const dsx::tokenizer::Tokenizer& tok) const {
    auto ids = dsx::test::corpus_ids(tok, lines);
    for (const auto& t : json_texts) {
      auto d = dsx::test::document_ids(tok, t);
      ids.insert(ids.end(), d.begin(), d.end());
    }
    return ids;
  }
  std::string files() const { return dir.file("a.txt") + " " + dir.file("b.jsonl"); }
};

}  // namespace

TEST(DsxTokenize, ShardsHoldTheTokenizersIdsWithEosBetweenDocuments) {
  Inputs in;
  for (const char* name : {"gpt2", "llama3", "spm"}) {
    const std::string out = in.dir.file(std::string("out_") + name);
    const auto tok = dsx::test::load_fixture(name);
    const auto expected = in.expected(*tok);
    ASSERT_GT(std::filesystem::file_size(in.dir.file("a.txt")), 20u * 4096);  // many chunks
    auto r =
        run_dsx("tokenize " + in.files() + " --tokenizer " + dsx::test::fixture_tokenizer(name) +
                " --out " + out + " --shard_tokens 7000 --chunk_size 4K --threads 2");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(read_shards(out + "/train_*.bin"), expected) << name;
    const size_t docs = 3 + std::count_if(in.lines.begin(), in.lines.end(),
                                          [](auto& l) { return !dsx::test::blank(l); });
    const size_t shards = (expected.size() + 6999) / 7000;
    EXPECT_NE(r.output.find("dsx tokenize: 2 files, " + std::to_string(docs) + " documents, " +
                            std::to_string(expected.size()) + " tokens, " + std::to_string(shards) +
                            " shards"),
              std::string::npos)
        << r.output;
    EXPECT_TRUE(std::filesystem::exists(out + "/tokenize.json"));
    // One chunk for everything gives the same shards.
    auto whole =
        run_dsx("tokenize " + in.files() + " --tokenizer " + dsx::test::fixture_tokenizer(name) +
                " --out " + out + "_whole --shard_tokens 7000");
    ASSERT_EQ(whole.exit_code, 0) << whole.output;
    EXPECT_EQ(read_shards(out + "_whole/train_*.bin"), expected) << name;
  }
}

// The fixture GPT-2 tokenizer with one more special token at id 70000: a vocabulary past 16
// bits, so the shards are Llama 3's uint32 kind (magic 20240801, version 7).
TEST(DsxTokenize, VocabulariesPast16BitsGetUint32Shards) {
  Inputs in;
  const std::string folder = in.dir.file("big_vocab");
  std::filesystem::create_directories(folder);
  std::ifstream src(dsx::test::fixture_tokenizer("gpt2") + "/tokenizer.json");
  std::string json((std::istreambuf_iterator<char>(src)), std::istreambuf_iterator<char>());
  const size_t at = json.find("\"added_tokens\": [");
  ASSERT_NE(at, std::string::npos);
  json.insert(
      json.find('[', at) + 1,
      "{\"id\": 70000, \"content\": \"<|big|>\", \"single_word\": false, \"lstrip\": false, "
      "\"rstrip\": false, \"normalized\": false, \"special\": true},");
  dsx::test::write_file(folder + "/tokenizer.json", json);
  std::filesystem::copy_file(dsx::test::fixture_tokenizer("gpt2") + "/tokenizer_config.json",
                             folder + "/tokenizer_config.json");
  auto tok = dsx::tokenizer::load_tokenizer(folder);
  ASSERT_EQ(tok->vocab_size(), 70001);
  auto r =
      run_dsx("tokenize " + in.files() + " --tokenizer " + folder + " --out " + in.dir.file("out"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("uint32"), std::string::npos) << r.output;
  const auto shards = dsx::models::glob_files(in.dir.file("out") + "/train_*.bin");
  EXPECT_EQ(dsx::models::TokenFile::open_shard(shards[0]).token_bytes(), 4u);
  EXPECT_EQ(read_shards(in.dir.file("out") + "/train_*.bin"), in.expected(*tok));
  // Training on them sees the tokenizer's vocabulary (tokenize.json), not GPT-2's.
  dsx::models::TokenLoaderOptions o;
  o.batch = 2, o.seq_len = 16;
  EXPECT_EQ(dsx::dataset::make_shard_loader(in.dir.file("out") + "/train_*.bin", o)->vocab_size(),
            70001);
}

TEST(DsxTokenize, ValidationShareGoesToValShards) {
  Inputs in;
  const auto tok = dsx::test::load_fixture("gpt2");
  const std::string out = in.dir.file("out");
  auto r =
      run_dsx("tokenize " + in.files() + " --tokenizer " + dsx::test::fixture_tokenizer("gpt2") +
              " --out " + out + " --val_fraction 0.1 --chunk_size 8K");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto train = read_shards(out + "/train_*.bin"), val = read_shards(out + "/val_*.bin");
  EXPECT_EQ(train.size() + val.size(), in.expected(*tok).size());
  const auto eos = *tok->eos_id();
  const double val_docs = static_cast<double>(std::count(val.begin(), val.end(), eos));
  const double all_docs =
      val_docs + static_cast<double>(std::count(train.begin(), train.end(), eos));
  EXPECT_NEAR(val_docs / all_docs, 0.1, 0.01);
  EXPECT_EQ(val.back(), eos);
}

TEST(DsxTokenize, AKilledRunLeavesOnlyWholeShards) {
  dsx::test::TempDir dir;
  std::string big;
  const auto lines = dsx::test::corpus_lines(4000, 9);
  for (int i = 0; i < 40; ++i) big += dsx::test::joined(lines);  // several MB
  dsx::test::write_file(dir.file("big.txt"), big);
  const std::string out = dir.file("out");
  auto r = run_command("(" + std::string(DSX_EXE) + " tokenize " + dir.file("big.txt") +
                       " --tokenizer " + dsx::test::fixture_tokenizer("gpt2") + " --out " + out +
                       " --shard_tokens 20000 --chunk_size 16K --threads 1 & pid=$!; sleep 0.7; "
                       "kill -9 $pid; wait $pid)");
  const bool killed = r.exit_code != 0;  // a fast machine may finish first: its last shard is short
  for (const auto& e : std::filesystem::directory_iterator(out)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with(".") || name == "tokenize.json")
      continue;  // the killed run's temporary file
    ASSERT_TRUE(name.starts_with("train_")) << name;
    auto f = dsx::models::TokenFile::open_shard(e.path().string());  // throws on a half shard
    if (killed) {
      EXPECT_EQ(f.size(), 20000u) << name;
    }
  }
}

TEST(DsxTokenize, ErrorsSayWhatIsWrong) {
  Inputs in;
  const std::string tok = " --tokenizer " + dsx::test::fixture_tokenizer("gpt2");
  auto r = run_dsx("tokenize " + in.dir.file("nope.txt") + tok + " --out " + in.dir.file("o1"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("nope.txt': No such file"), std::string::npos) << r.output;
  r = run_dsx("tokenize " + in.files() + " --tokenizer " + in.dir.file("no_tokenizer") + " --out " +
              in.dir.file("o2"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("no_tokenizer"), std::string::npos) << r.output;
  dsx::test::write_file(in.dir.file("blank.txt"), "\n  \n\n");
  r = run_dsx("tokenize " + in.dir.file("blank.txt") + tok + " --out " + in.dir.file("o3"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("no documents"), std::string::npos) << r.output;
  r = run_dsx("tokenize " + in.files() + tok + " --out " +
              in.dir.file("a.txt"));  // a file, not a folder
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--out '" + in.dir.file("a.txt") + "'"), std::string::npos) << r.output;
  ASSERT_EQ(run_dsx("tokenize " + in.files() + tok + " --out " + in.dir.file("o4")).exit_code, 0);
  r = run_dsx("tokenize " + in.files() + tok + " --out " + in.dir.file("o4"));
  EXPECT_NE(r.output.find("already holds token shards"), std::string::npos) << r.output;
  dsx::test::write_file(in.dir.file("bad.jsonl"), "{\"text\": \"ok\"}\n{\"body\": \"no text\"}\n");
  r = run_dsx("tokenize " + in.dir.file("bad.jsonl") + tok + " --out " + in.dir.file("o5"));
  EXPECT_NE(r.output.find("bad.jsonl:2: missing field 'text'"), std::string::npos) << r.output;
  EXPECT_TRUE(
      dsx::test::is_usage_error(run_dsx("tokenize " + in.files() + " --out x"), "--tokenizer"));
  EXPECT_TRUE(dsx::test::is_usage_error(run_dsx("tokenize " + in.files() + tok), "--out"));
}

// A byte that is not UTF-8 is named by file, line and offset in the file, the same every run and
// whatever the chunk size (it was an offset inside one parallel chunk: 15 or 18 for one file).
TEST(DsxTokenize, InvalidUtf8NamesTheFileLineAndOffset) {
  Inputs in;
  std::string text;
  for (int i = 0; i < 3000; ++i) text += "line " + std::to_string(i) + " of plain text\n";
  const size_t offset = text.size() + 3;
  text += "bad\xE9 latin-1\nafter\n";
  dsx::test::write_file(in.dir.file("latin1.txt"), text);
  const std::string expected = in.dir.file("latin1.txt") + ":3001: not valid UTF-8 at byte offset " +
                               std::to_string(offset) + " (0xE9)";
  const std::string tok = " --tokenizer " + dsx::test::fixture_tokenizer("gpt2");
  for (const char* chunk : {"4K", "64K", "16M", "4K"}) {
    auto r = run_dsx("tokenize " + in.dir.file("latin1.txt") + tok + " --chunk_size " + chunk + " --out " +
                     in.dir.file(std::string("o_") + chunk));
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find(expected), std::string::npos) << chunk << ": " << r.output;
  }
}
