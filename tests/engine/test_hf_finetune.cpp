// Fine-tuning Hugging Face folders as a user does (issue 16's "done when"): real ranks through
// `dsx launch`, configs/zero3.json, text through the folder's own tokenizer packed into --seq_len
// rows, a save, a resume that ends where an uninterrupted run does, `dsx export` to a folder
// transformers loads, and `dsx sample --prompt` printing text - for a Llama 3-style folder and a
// GPT-2 one.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <string>

#include "models/io/gpt2_weights.h"
#include "models/io/hf_folder.h"
#include "models/model_source.h"
#include "tests/comm/free_port.h"
#include "tests/engine/test_files.h"
#include "tests/models/temp_dir.h"
#include "tests/tools/run_command.h"
#include "tokenizer/load_tokenizer.h"

using dsx::test::read_all;
using dsx::test::run_command;

namespace {

const std::string kTokenizer = std::string(DSX_SOURCE_DIR) + "/tests/tokenizer/data/llama3";
const std::string kGpt2Tokenizer = std::string(DSX_SOURCE_DIR) + "/tests/tokenizer/data/gpt2";
// A SentencePiece tokenizer as transformers 5 saves a Llama 2 or Mistral one: tokenizer.json only.
const std::string kSentencePieceJson = std::string(DSX_SOURCE_DIR) + "/tests/tokenizer/data/spm_json";
const std::string kZero3 = std::string(DSX_SOURCE_DIR) + "/configs/zero3.json";

// A tiny random Llama 3-style folder (GQA, untied head, bf16 on disk) with the llama3 fixture
// tokenizer's files beside it, as a Hugging Face download looks.
// `edit` changes the config before the folder is written (another model type, say);
// `tokenizer_dir` holds the tokenizer files.
dsx::models::LlamaConfig write_model_folder(const std::string& dir,
                                            const std::function<void(dsx::models::LlamaConfig&)>& edit = {},
                                            const std::string& tokenizer_dir = kTokenizer) {
  const auto tokenizer = dsx::tokenizer::load_tokenizer(tokenizer_dir);
  dsx::models::ModelShape shape;
  shape.family = dsx::models::ModelShape::Family::Llama;
  auto& c = shape.llama;
  c.vocab_size = tokenizer->vocab_size();
  c.hidden_size = 32, c.intermediate_size = 64, c.num_layers = 2;
  c.num_heads = 4, c.num_kv_heads = 2, c.head_dim = 8, c.max_position_embeddings = 64;
  c.rope_theta = 500000.0;
  c.bos_token_id = tokenizer->bos_id().value_or(-1), c.eos_token_id = tokenizer->eos_id().value_or(-1);
  if (edit) edit(c);
  const std::vector<float> weights = dsx::models::initial_parameters(shape, 7);
  dsx::models::HfWriteOptions options;
  options.dtype = dsx::kernels::DType::BF16;
  options.tokenizer_from = tokenizer_dir;
  dsx::models::write_llama_hf_folder(dir, c, weights.data(), options);
  return c;
}

std::string write_text(const dsx::test::TempDir& dir) {
  const std::string path = dir.file("corpus.txt");
  std::ofstream out(path);
  const char* words[] = {"the", "cat", "sat", "on", "a", "warm", "mat", "and", "watched", "birds", "fly", "south"};
  for (int line = 0; line < 400; ++line) {
    for (int w = 0; w < 9; ++w) out << words[(line * 7 + w * 5) % 12] << (w == 8 ? ".\n" : " ");
  }
  return path;
}

dsx::test::CommandResult train(const std::string& args) {
  const std::string launch = std::string(DSX_EXE) + " launch --num_gpus 2 --master_port " +
                             std::to_string(dsx::test::free_port()) + " ";
  return run_command("OMP_NUM_THREADS=1 timeout 300 " + launch + DSX_EXE + " train --progress plain " + args);
}

double first_loss(const std::string& output) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex(R"(loss\s+([0-9.]+) first)"))) return -1;
  return std::stod(m[1]);
}

}  // namespace

TEST(LlamaFinetune, AFolderTrainsOnTextResumesExportsAndSamples) {
  dsx::test::TempDir dir;
  const std::string model = dir.file("llama");
  const auto config = write_model_folder(model);
  const std::string data = " --deepspeed_config " + kZero3 + " --model " + model + " --data text:" + write_text(dir) +
                           " --seq_len 32";

  auto first = train(data + " --steps 4 --save " + dir.file("out"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("ZeRO stage 3"), std::string::npos) << first.output;
  EXPECT_NE(first.output.find("(Hugging Face llama layout)"), std::string::npos) << first.output;
  // Random weights predict about uniformly: the first loss is near ln(V).
  EXPECT_NEAR(first_loss(first.output), std::log(config.vocab_size), 0.5) << first.output;

  auto resumed = train(data + " --steps 8 --load " + dir.file("out") + " --save " + dir.file("out"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from " + dir.file("out") + "/global_step4 at step 4"), std::string::npos)
      << resumed.output;
  auto straight = train(data + " --steps 8 --save " + dir.file("straight"));
  ASSERT_EQ(straight.exit_code, 0) << straight.output;

  // Both exports are Hugging Face folders, and the resumed run's weights are the uninterrupted run's.
  for (const char* name : {"out", "straight"}) {
    auto e = run_command(std::string(DSX_EXE) + " export " + dir.file(name) + " --out " + dir.file(std::string(name) + "_hf"));
    ASSERT_EQ(e.exit_code, 0) << e.output;
  }
  EXPECT_EQ(read_all(dir.file("out_hf/model.safetensors")), read_all(dir.file("straight_hf/model.safetensors")));
  for (const char* file : {"config.json", "tokenizer.json", "tokenizer_config.json"}) {
    EXPECT_TRUE(std::filesystem::exists(dir.file(std::string("out_hf/") + file))) << file;
  }
  const auto exported = dsx::models::read_llama_hf_folder(dir.file("out_hf"));
  EXPECT_EQ(exported.config.num_kv_heads, 2);
  EXPECT_EQ(exported.config.vocab_size, config.vocab_size);
  EXPECT_DOUBLE_EQ(exported.config.rope_theta, 500000.0);

  // The exported folder samples text through its own tokenizer.
  auto s = run_command(std::string(DSX_EXE) + " sample " + dir.file("out_hf") +
                       " --prompt 'the cat' --tokens 6 --temperature 0");
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_EQ(s.output.rfind("the cat", 0), 0u) << s.output;
  EXPECT_GT(s.output.size(), std::string("the cat\n").size()) << s.output;
}

TEST(LlamaFinetune, InstructionDataTrainsOnlyTheResponses) {
  dsx::test::TempDir dir;
  const std::string model = dir.file("llama");
  write_model_folder(model);
  const std::string jsonl = dir.file("pairs.jsonl");
  {
    std::ofstream out(jsonl);
    for (int i = 0; i < 64; ++i) {
      out << R"({"prompt": "What is )" << i << R"( plus one?", "response": " )" << i + 1 << R"(."})" << "\n";
    }
  }
  auto r = train(" --deepspeed_config " + kZero3 + " --model " + model + " --data jsonl:" + jsonl +
                 " --seq_len 24 --steps 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("training summary"), std::string::npos) << r.output;

  // A bad line is named with its place.
  {
    std::ofstream out(jsonl, std::ios::app);
    out << R"({"prompt": "no answer here"})" << "\n";
  }
  auto bad = train(" --deepspeed_config " + kZero3 + " --model " + model + " --data jsonl:" + jsonl +
                   " --seq_len 24 --steps 1");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find(jsonl + ":65"), std::string::npos) << bad.output;
}

TEST(LlamaFinetune, ConversationsTrainThroughTheFolderChatTemplate) {
  dsx::test::TempDir dir;
  const std::string model = dir.file("llama");
  write_model_folder(model);
  const std::string templ = model + "/chat_template.jinja";
  std::filesystem::copy_file(std::string(DSX_SOURCE_DIR) + "/tests/jinja/data/templates/llama3.jinja", templ);
  const std::string jsonl = dir.file("chat.jsonl");
  {
    std::ofstream out(jsonl);
    for (int i = 0; i < 32; ++i) {
      out << R"({"messages": [{"role": "user", "content": "What is )" << i
          << R"( plus one?"}, {"role": "assistant", "content": ")" << i + 1 << R"(."}]})" << "\n";
    }
  }
  const std::string args = " --deepspeed_config " + kZero3 + " --model " + model + " --data jsonl:" + jsonl;
  auto r = train(args + " --seq_len 40 --steps 2 --save " + dir.file("out"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("training summary"), std::string::npos) << r.output;

  // The export keeps the template beside the tokenizer, where transformers reads it.
  auto e = run_command(std::string(DSX_EXE) + " export " + dir.file("out") + " --out " + dir.file("out_hf"));
  ASSERT_EQ(e.exit_code, 0) << e.output;
  EXPECT_EQ(read_all(dir.file("out_hf/chat_template.jinja")), read_all(templ));

  // dsx sample --chat sends the prompt as a user turn through the template: greedy, it answers as
  // the ids of Llama 3's rendered turn given by hand do.
  const auto tok = dsx::tokenizer::load_tokenizer(kTokenizer);
  dsx::tokenizer::EncodeOptions templated;
  templated.add_special_tokens = false;
  std::string ids;
  for (int32_t id : tok->encode("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWhat is 3 plus one?"
                                "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
                                templated))
    ids += (ids.empty() ? "" : ",") + std::to_string(id);
  const std::string sample = std::string(DSX_EXE) + " sample " + dir.file("out_hf") + " --tokens 5 --temperature 0";
  auto chat = run_command(sample + " --chat --prompt 'What is 3 plus one?'");
  ASSERT_EQ(chat.exit_code, 0) << chat.output;
  auto by_ids = run_command(sample + " --prompt-tokens " + ids);
  ASSERT_EQ(by_ids.exit_code, 0) << by_ids.output;
  EXPECT_EQ(chat.output, by_ids.output);

  // Without a template a conversation is refused, naming its line, and so is --chat.
  std::filesystem::remove(templ);
  auto bad = train(args + " --seq_len 40 --steps 1");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find(jsonl + ":1: a conversation needs the model's chat template"), std::string::npos)
      << bad.output;
  std::filesystem::remove(dir.file("out_hf/chat_template.jinja"));
  auto no_chat = run_command(sample + " --chat --prompt hi");
  EXPECT_NE(no_chat.exit_code, 0);
  EXPECT_NE(no_chat.output.find("has no chat template"), std::string::npos) << no_chat.output;
}

TEST(LlamaFinetune, WhatCannotBeTrainedExactlyIsRefusedByName) {
  dsx::test::TempDir dir;
  // Text data without a tokenizer for a model whose vocabulary is not bytes needs one.
  auto no_tok = train(" --deepspeed_config " + kZero3 + " --model llama-tiny --data jsonl:" + dir.file("x.jsonl") +
                      " --steps 1");
  EXPECT_NE(no_tok.exit_code, 0);
  EXPECT_NE(no_tok.output.find("--data jsonl: needs a tokenizer"), std::string::npos) << no_tok.output;
  // A longer row than the model has positions.
  const std::string model = dir.file("llama");
  write_model_folder(model);
  auto too_long = train(" --deepspeed_config " + kZero3 + " --model " + model + " --data text:" + write_text(dir) +
                        " --seq_len 65 --steps 1");
  EXPECT_NE(too_long.exit_code, 0);
  EXPECT_NE(too_long.output.find("--seq_len 65 needs 65 positions"), std::string::npos) << too_long.output;
  // A folder with a tokenizer and no --data: the built-in byte task is not what it came for.
  auto no_data = train(" --deepspeed_config " + kZero3 + " --model " + model + " --steps 1");
  EXPECT_NE(no_data.exit_code, 0);
  EXPECT_NE(no_data.output.find("give --data text:FILE, jsonl:FILE or shards:GLOB"), std::string::npos) << no_data.output;
  // An architecture dsx does not have.
  std::filesystem::create_directories(dir.file("gemma"));
  std::ofstream(dir.file("gemma/config.json")) << R"({"architectures": ["GemmaForCausalLM"], "model_type": "gemma"})";
  auto gemma = train(" --deepspeed_config " + kZero3 + " --model " + dir.file("gemma") + " --steps 1");
  EXPECT_NE(gemma.exit_code, 0);
  EXPECT_NE(gemma.output.find("GemmaForCausalLM"), std::string::npos) << gemma.output;
}

// A GPT-2 folder as the Hub has them (model.safetensors, config.json, tokenizer.json): its text
// goes through its byte-level BPE, and the export carries the tokenizer on to dsx sample.
TEST(Gpt2Finetune, AFolderTrainsOnTextThroughItsTokenizerAndSamples) {
  dsx::test::TempDir dir;
  const std::string model = dir.file("gpt2");
  std::filesystem::create_directories(model);
  dsx::models::ModelShape shape;
  auto& c = shape.gpt2;
  c.vocab_size = dsx::tokenizer::load_tokenizer(kGpt2Tokenizer)->vocab_size();
  c.padded_vocab_size = dsx::models::padded_vocab(c.vocab_size);
  c.max_seq_len = 64, c.num_layers = 2, c.num_heads = 4, c.channels = 32;
  const std::vector<float> weights = dsx::models::initial_parameters(shape, 3);
  dsx::models::write_gpt2_safetensors(model + "/model.safetensors", c, weights.data());
  dsx::models::write_gpt2_hf_config(model + "/config.json", c);
  dsx::models::copy_hf_tokenizer_files(kGpt2Tokenizer, model);

  auto r = train(" --deepspeed_config " + kZero3 + " --model " + model + " --data text:" + write_text(dir) +
                 " --seq_len 48 --steps 3 --save " + dir.file("out"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NEAR(first_loss(r.output), std::log(c.vocab_size), 0.5) << r.output;
  auto e = run_command(std::string(DSX_EXE) + " export " + dir.file("out") + " --out " + dir.file("hf"));
  ASSERT_EQ(e.exit_code, 0) << e.output;
  EXPECT_TRUE(std::filesystem::exists(dir.file("hf/tokenizer.json")));
  auto s = run_command(std::string(DSX_EXE) + " sample " + dir.file("hf") + " --prompt 'the cat' --tokens 4 --temperature 0");
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_EQ(s.output.rfind("the cat", 0), 0u) << s.output;
}

// Mistral v0.1's sliding window (4096 of 32768 positions; here 16 of 64): rows default to the
// window's length, where full causal attention is the window's exactly, and longer ones are
// refused naming the window. The folder's tokenizer is SentencePiece's as tokenizer.json alone.
TEST(LlamaFinetune, AMistralWindowTrainsRowsUpToItsLength) {
  dsx::test::TempDir dir;
  const std::string model = dir.file("mistral");
  write_model_folder(
      model,
      [](dsx::models::LlamaConfig& c) {
        c.architecture = "MistralForCausalLM", c.model_type = "mistral", c.sliding_window = 16;
      },
      kSentencePieceJson);
  ASSERT_FALSE(std::filesystem::exists(model + "/tokenizer.model"));
  const std::string data = " --deepspeed_config " + kZero3 + " --model " + model + " --data text:" + write_text(dir);
  auto trained = train(data + " --steps 2");
  EXPECT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_NE(trained.output.find(" rows of 16 tokens"), std::string::npos) << trained.output;
  auto too_long = train(data + " --seq_len 17 --steps 1");
  EXPECT_NE(too_long.exit_code, 0);
  EXPECT_NE(too_long.output.find("--seq_len 17 needs 17 positions; model " + model + " has 16 (sliding_window: "),
            std::string::npos)
      << too_long.output;
  auto s = run_command(std::string(DSX_EXE) + " sample " + model + " --prompt 'the cat' --tokens 4 --temperature 0");
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_EQ(s.output.rfind("the cat", 0), 0u) << s.output;
}
