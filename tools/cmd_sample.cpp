// `dsx sample`: loads GPT-2 weights (llm.c .bin or safetensors) and shows what the model learned:
// generated text from a prompt, the answer to an addition problem, or held-out accuracy on the
// built-in addition task.
#include <iostream>
#include <sstream>

#include "dsx/error.h"
#include "models/data/addition.h"
#include "models/gpt2/gpt2_cpu.h"
#include "models/io/gpt2_weights.h"
#include "models/io/llmc_tokenizer.h"
#include "models/local_params.h"
#include "models/sampling.h"
#include "tools/cli.h"

namespace dsx::tools {

namespace {

using models::GPT2Cpu;
using models::LocalParams;

std::vector<int32_t> parse_token_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      ids.push_back(std::stoi(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw Error(ErrorKind::Usage, "dsx sample: --prompt-tokens takes comma-separated token ids, not '" + item + "'");
    }
  }
  return ids;
}

// "123+456" -> (123, 456)
void parse_sum(const std::string& text, uint64_t& a, uint64_t& b, int digits) {
  auto plus = text.find('+');
  bool ok = plus != std::string::npos && plus > 0 && plus + 1 < text.size() &&
            text.find_first_not_of("0123456789+") == std::string::npos && text.find('+', plus + 1) == std::string::npos;
  if (ok) {
    a = std::stoull(text.substr(0, plus));
    b = std::stoull(text.substr(plus + 1));
  }
  uint64_t limit = 1;
  for (int i = 0; i < digits; ++i) limit *= 10;
  if (!ok || a >= limit || b >= limit)
    throw Error(ErrorKind::Usage, "dsx sample: --add takes A+B with A, B below " + std::to_string(limit) +
                                      " (the model's --digits " + std::to_string(digits) + "), got '" + text + "'");
}

}  // namespace

int run_sample(int argc, char** argv) {
  po::options_description options("dsx sample");
  options.add_options()
      ("weights", po::value<std::string>()->required(), "GPT-2 weights: llm.c .bin (fp32/bf16) or .safetensors")
      ("prompt", po::value<std::string>()->default_value("\n"), "prompt text (byte-level models)")
      ("prompt-tokens", po::value<std::string>(), "prompt as comma-separated token ids (GPT-2 vocabulary)")
      ("tokens", po::value<int>()->default_value(128), "tokens to generate")
      ("temperature", po::value<float>()->default_value(1.0f), "sampling temperature; 0 is greedy")
      ("top-k", po::value<int>()->default_value(0), "sample among the k most likely tokens (0: all)")
      ("seed", po::value<uint64_t>()->default_value(0), "random seed")
      ("tokenizer", po::value<std::string>(), "llm.c gpt2_tokenizer.bin to print GPT-2 tokens as text")
      ("heads", po::value<int>()->default_value(0), "attention heads, if the weights file does not say")
      ("add", po::value<std::string>(), "ask the addition model A+B (greedy) and check the answer")
      ("eval-add", po::value<int>(), "exact-match accuracy on this many held-out addition problems")
      ("digits", po::value<int>()->default_value(2), "operand digits of the addition task");
  po::positional_options_description positional;
  positional.add("weights", 1);
  auto args = parse_args(argc, argv, "dsx sample [--weights] FILE [options]", options, &positional);
  if (args.help) return 0;
  const auto& v = args.vars;

  auto weights = models::load_gpt2_weights(v["weights"].as<std::string>(), v["heads"].as<int>());
  const auto& config = weights.config;
  const int tokens = v["tokens"].as<int>();
  if (tokens < 0) throw Error(ErrorKind::Usage, "dsx sample: --tokens must be >= 0");

  if (v.count("add") || v.count("eval-add")) {
    if (config.vocab_size != 256)
      throw Error(ErrorKind::Usage, "dsx sample: --add/--eval-add need a byte-level model (vocabulary 256); this one has " +
                                        std::to_string(config.vocab_size));
    models::AdditionTask task(v["digits"].as<int>());
    if (task.seq_len() + 1 > config.max_seq_len)
      throw Error(ErrorKind::Usage, "dsx sample: the model's context is too short for --digits " +
                                        std::to_string(task.digits()));
    const int batch = 64;
    GPT2Cpu<float> model(config, batch, task.seq_len() + 1);
    LocalParams<float> params(model);
    std::copy(weights.params.begin(), weights.params.end(), params.params());
    if (v.count("add")) {
      uint64_t a = 0, b = 0;
      parse_sum(v["add"].as<std::string>(), a, b, task.digits());
      std::string prompt = task.prompt(a, b);
      models::SampleOptions o;
      o.max_new_tokens = task.digits() + 2, o.temperature = 0.0f, o.stop_token = '\n';
      auto out = models::generate(model, params, std::vector<int32_t>(prompt.begin(), prompt.end()), o);
      std::string answer(out.begin(), out.end());
      int64_t got = task.parse_answer(answer);
      std::cout << a << " + " << b << " = " << (got < 0 ? "?" : std::to_string(got)) << "   (model wrote \""
                << prompt << answer.substr(0, answer.find('\n')) << "\", digits reversed; "
                << (got == static_cast<int64_t>(a + b) ? "correct" : "wrong, the sum is " + std::to_string(a + b))
                << ")\n";
    }
    if (v.count("eval-add")) {
      int n = v["eval-add"].as<int>();
      if (n < 1) throw Error(ErrorKind::Usage, "dsx sample: --eval-add must be positive");
      double acc = models::addition_accuracy(model, params, task, n, batch);
      std::cout << "held-out addition accuracy: " << acc * 100 << "% of " << n << " problems ("
                << task.digits() << "-digit operands)\n";
    }
    return 0;
  }

  std::vector<int32_t> prompt;
  if (v.count("prompt-tokens")) {
    prompt = parse_token_ids(v["prompt-tokens"].as<std::string>());
  } else if (config.vocab_size == 256) {
    std::string text = v["prompt"].as<std::string>();
    prompt.assign(reinterpret_cast<const uint8_t*>(text.data()), reinterpret_cast<const uint8_t*>(text.data()) + text.size());
  } else {
    prompt = {50256};  // GPT-2's <|endoftext|>: an unconditional sample, as llm.c does
  }
  if (prompt.empty()) throw Error(ErrorKind::Usage, "dsx sample: the prompt is empty");
  for (int32_t t : prompt)
    if (t < 0 || t >= config.vocab_size)
      throw Error(ErrorKind::Usage, "dsx sample: prompt token " + std::to_string(t) + " is outside the vocabulary [0, " +
                                        std::to_string(config.vocab_size) + ")");
  GPT2Cpu<float> model(config, 1, std::min<int>(config.max_seq_len, static_cast<int>(prompt.size()) + tokens));
  LocalParams<float> params(model);
  std::copy(weights.params.begin(), weights.params.end(), params.params());
  models::SampleOptions o;
  o.max_new_tokens = tokens, o.temperature = v["temperature"].as<float>(), o.top_k = v["top-k"].as<int>();
  o.seed = v["seed"].as<uint64_t>();
  std::unique_ptr<models::LlmcTokenizer> tokenizer;
  if (v.count("tokenizer")) tokenizer = std::make_unique<models::LlmcTokenizer>(v["tokenizer"].as<std::string>());
  if (tokenizer) o.stop_token = tokenizer->eot_token();
  auto out = models::generate(model, params, prompt, o);
  for (int32_t t : out) {
    if (config.vocab_size == 256)
      std::cout << static_cast<char>(t);
    else if (tokenizer)
      std::cout << tokenizer->decode(t);
    else
      std::cout << t << ' ';
  }
  std::cout << std::endl;
  return 0;
}

}  // namespace dsx::tools
