// Hostile input as the `dsx` binary meets it (issue 33): whatever a file holds, every reader
// ends with an error that names the file and what to do, never a crash (rc 139) or a hang.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/models/temp_dir.h"
#include "tests/tools/run_command.h"

using dsx::test::run_command;
using dsx::test::run_dsx;
namespace fs = std::filesystem;

namespace {

// 200,000 levels in 400 KB: unbounded, a recursive parser or tree walk overflows its stack.
const std::string kDeep = std::string(200000, '[') + std::string(200000, ']');

void write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

std::string fixture(const std::string& path) {
  return std::string(DSX_SOURCE_DIR) + "/tests/" + path;
}

// An error exit (not a signal) whose message names `file` and the depth limit.
::testing::AssertionResult refuses_deep(const dsx::test::CommandResult& r,
                                        const std::string& file) {
  if (r.exit_code != 0 && r.exit_code < 128 && r.output.find(file) != std::string::npos &&
      r.output.find("nested more than 64 levels") != std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "rc " << r.exit_code << ", expected an error naming "
                                       << file << " and the depth limit:\n"
                                       << r.output.substr(0, 2000);
}

// Runs dsx with at most 4 GiB of address space (on the CPU: a CUDA context alone would reserve
// more), so that a size believed before it is checked shows as a failure here instead of taking
// the machine's memory.
dsx::test::CommandResult run_bounded(const std::string& args) {
  return run_command(
      "ulimit -v 4194304; CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 timeout "
      "120 " +
      std::string(DSX_EXE) + " " + args);
}

}  // namespace

TEST(HostileInput, DeepJsonIsRefusedByEveryReaderNamingTheFile) {
  dsx::test::TempDir dir;
  const std::string d = dir.path();

  write(d + "/c.json", kDeep);  // the repro
  EXPECT_TRUE(refuses_deep(run_dsx("estimate --hf-config " + d + "/c.json"), d + "/c.json"));

  write(d + "/model/config.json", kDeep);  // a model folder's config.json (train, sample)
  EXPECT_TRUE(refuses_deep(run_dsx("sample " + d + "/model --tokens 1"), d + "/model/config.json"));

  // A safetensors header: 8 bytes of length, then the JSON.
  fs::create_directories(d + "/weights");
  fs::copy_file(fixture("models/data/llama/config.json"), d + "/weights/config.json");
  const uint64_t n = kDeep.size();
  write(d + "/weights/model.safetensors",
        std::string(reinterpret_cast<const char*>(&n), 8) + kDeep);
  EXPECT_TRUE(refuses_deep(run_dsx("sample " + d + "/weights --prompt-tokens 1 --tokens 1"),
                           d + "/weights/model.safetensors"));

  write(d + "/ck/latest", "global_step1\n");  // a checkpoint manifest
  write(d + "/ck/global_step1/manifest.json", kDeep);
  EXPECT_TRUE(refuses_deep(run_dsx("checkpoint verify " + d + "/ck"), "manifest.json"));

  write(d + "/trace/rank0.trace.json", kDeep);
  EXPECT_TRUE(refuses_deep(run_dsx("trace merge " + d + "/trace"), d + "/trace/rank0.trace.json"));

  const std::string gpt2 = fixture("tokenizer/data/gpt2");
  write(d + "/text.txt", "hello\n");
  write(d + "/deep.jsonl", "{\"text\": \"fine\"}\n{\"text\": " + kDeep + "}\n");
  EXPECT_TRUE(refuses_deep(
      run_dsx("tokenize " + d + "/deep.jsonl --tokenizer " + gpt2 + " --out " + d + "/o1"),
      d + "/deep.jsonl:2"));

  write(d + "/tok/tokenizer.json", kDeep);
  EXPECT_TRUE(refuses_deep(
      run_dsx("tokenize " + d + "/text.txt --tokenizer " + d + "/tok --out " + d + "/o2"),
      d + "/tok/tokenizer.json"));

  fs::create_directories(d + "/tok_config");
  fs::copy_file(gpt2 + "/tokenizer.json", d + "/tok_config/tokenizer.json");
  write(d + "/tok_config/tokenizer_config.json", kDeep);
  EXPECT_TRUE(refuses_deep(
      run_dsx("tokenize " + d + "/text.txt --tokenizer " + d + "/tok_config --out " + d + "/o3"),
      d + "/tok_config/tokenizer_config.json"));
}

TEST(HostileInput, AnEndlessConfigIsRefusedAtItsSizeCap) {
  const auto r = run_bounded("config check /dev/zero");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("/dev/zero: longer than 16 MiB"), std::string::npos) << r.output;
}

// config.json's sizes are checked against the weights before they size anything: 100,000
// declared layers once allocated 18 GB (here, with the tiny fixture, 3.5 GB) first.
TEST(HostileInput, ALayerCountTheWeightsDoNotHoldIsRefusedBeforeAllocating) {
  dsx::test::TempDir dir;
  const std::string model = dir.path() + "/model";
  fs::create_directories(model);
  fs::copy_file(fixture("models/data/llama/model.safetensors"), model + "/model.safetensors");
  std::ifstream in(fixture("models/data/llama/config.json"));
  std::string config((std::istreambuf_iterator<char>(in)), {});
  const std::string key = "\"num_hidden_layers\": 2";
  ASSERT_NE(config.find(key), std::string::npos);
  write(model + "/config.json",
        config.replace(config.find(key), key.size(), "\"num_hidden_layers\": 100000"));
  const auto r = run_bounded("sample " + model + " --prompt-tokens 1 --tokens 1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("says num_hidden_layers 100000, but its weights hold 2 layers"),
            std::string::npos)
      << r.output;
}

// OMP_NUM_THREADS past the machine's CPUs is clamped with a note: 100000 crashed training at its
// first parallel loop (rc 139) and 30000 took minutes and gigabytes creating threads.
TEST(HostileInput, AHugeOmpNumThreadsIsClampedWithANote) {
  dsx::test::TempDir dir;
  const auto r = run_command(
      "cd " + dir.path() + " && OMP_NUM_THREADS=100000 timeout 120 " + std::string(DSX_EXE) +
      " train --deepspeed_config " + std::string(DSX_SOURCE_DIR) +
      "/configs/zero0.json --model byte-small --steps 1 --eval_interval 0 --samples 0");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("note: OMP_NUM_THREADS=100000 is more than the"), std::string::npos)
      << r.output;
}
