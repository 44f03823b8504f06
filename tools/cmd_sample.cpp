// `dsx sample`: loads a model (a Hugging Face folder of any family dsx trains, or GPT-2 weights:
// llm.c .bin or safetensors) and shows what it learned: text generated from a prompt through its
// tokenizer, the answer to an addition problem, or held-out accuracy on the built-in addition task.
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>

#include "dsx/error.h"
#include "models/data/addition.h"
#include "models/io/gpt2_weights.h"
#include "models/io/hf_folder.h"
#include "models/io/llmc_tokenizer.h"
#include "models/local_params.h"
#include "models/io/nf4_base_weights.h"
#include "models/lora/lora_factory.h"
#include "models/lora/qlora_factory.h"
#include "models/lora/peft_adapter.h"
#include "models/model_source.h"
#include "models/sampling.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/generation_config.h"
#include "tokenizer/load_tokenizer.h"
#include "tools/cli.h"

namespace dsx::tools {

namespace {

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

// The model to sample: a Hugging Face folder (or a weights file inside one, as dsx train --save
// and dsx export leave it), else a GPT-2 weights file with --heads when it does not say.
models::ModelSource load_for_sampling(const std::string& path, int heads) {
  const std::filesystem::path p(path);
  const std::filesystem::path folder = std::filesystem::is_directory(p) ? p : p.parent_path();
  if (std::filesystem::is_directory(p) ||
      models::hf_folder_is_llama_family(folder.empty() ? "." : folder.string())) {
    return models::load_model_source(folder.empty() ? "." : folder.string());
  }
  models::ModelSource m;
  auto weights = models::load_gpt2_weights(path, heads);
  m.shape.gpt2 = weights.config;
  m.initial = std::move(weights.params);
  if (std::filesystem::exists(folder / "tokenizer.json") || std::filesystem::exists(folder / "tokenizer.model")) {
    m.folder = folder.string();
  }
  return m;
}

// How prompts become ids and ids text: a Hugging Face tokenizer (the folder's or --tokenizer DIR),
// llm.c's gpt2_tokenizer.bin (decoding only), bytes for byte-level models, else ids as numbers.
struct SampleText {
  std::unique_ptr<tokenizer::Tokenizer> hf;
  std::string hf_folder;  // where hf came from: its chat template and generation_config.json
  std::unique_ptr<models::LlmcTokenizer> llmc;
  bool bytes = false;

  std::vector<int32_t> encode(const std::string& text) const {
    if (hf) return hf->encode(text);
    if (bytes) return std::vector<int32_t>(reinterpret_cast<const uint8_t*>(text.data()),
                                           reinterpret_cast<const uint8_t*>(text.data()) + text.size());
    return {};
  }
  std::string decode(const std::vector<int32_t>& ids) const {
    if (hf) return hf->decode(ids, tokenizer::DecodeOptions{true});
    std::string out;
    for (int32_t t : ids) out += bytes ? std::string(1, static_cast<char>(t)) : llmc ? llmc->decode(t) : std::to_string(t) + " ";
    return out;
  }
  // The text `out` adds after `prompt`. Decoded with the prompt: SentencePiece's decoders drop the
  // space before a text's first word, which a continuation's first word keeps.
  std::string continuation(const std::vector<int32_t>& prompt, const std::vector<int32_t>& out) const {
    if (!hf) return decode(out);
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), out.begin(), out.end());
    const std::string whole = decode(all), before = decode(prompt);
    return whole.starts_with(before) ? whole.substr(before.size()) : decode(out);
  }
};

SampleText sample_text(const po::variables_map& v, const models::ModelSource& source) {
  SampleText t;
  const std::string given = v.count("tokenizer") ? v["tokenizer"].as<std::string>() : "";
  if (!given.empty() && std::filesystem::is_regular_file(given) && given.size() > 4 && given.substr(given.size() - 4) == ".bin") {
    t.llmc = std::make_unique<models::LlmcTokenizer>(given);
  } else if (!given.empty() || !source.folder.empty()) {
    const std::string dir = given.empty() ? source.folder : given;
    if (!given.empty() || std::filesystem::exists(dir + "/tokenizer.json") || std::filesystem::exists(dir + "/tokenizer.model")) {
      t.hf = tokenizer::load_tokenizer(dir);
      t.hf_folder = dir;
    }
  }
  t.bytes = !t.hf && source.shape.vocab_size() == 256;
  return t;
}

int sample_addition(const po::variables_map& v, const models::ModelSource& source) {
  const models::ModelShape& shape = source.shape;
  if (shape.vocab_size() != 256)
    throw Error(ErrorKind::Usage, "dsx sample: --add/--eval-add need a byte-level model (vocabulary 256); this one has " +
                                      std::to_string(shape.vocab_size()));
  models::AdditionTask task(v["digits"].as<int>());
  if (task.seq_len() + 1 > shape.max_seq_len())
    throw Error(ErrorKind::Usage, "dsx sample: the model's context is too short for --digits " + std::to_string(task.digits()));
  const int batch = 64;
  auto model = models::build_host_model(shape, batch, task.seq_len() + 1);
  LocalParams<float> params(*model);
  std::copy(source.initial.begin(), source.initial.end(), params.params());
  if (v.count("add")) {
    uint64_t a = 0, b = 0;
    parse_sum(v["add"].as<std::string>(), a, b, task.digits());
    std::string prompt = task.prompt(a, b);
    models::SampleOptions o;
    o.max_new_tokens = task.digits() + 2, o.temperature = 0.0f, o.stop_tokens = {'\n'};
    auto out = models::generate(*model, params, std::vector<int32_t>(prompt.begin(), prompt.end()), o);
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
    double acc = models::addition_accuracy(*model, params, task, n, batch);
    std::cout << "held-out addition accuracy: " << acc * 100 << "% of " << n << " problems ("
              << task.digits() << "-digit operands)\n";
  }
  return 0;
}

// --chat: the prompt as one user turn through the tokenizer folder's chat template, with the
// generation prompt, as transformers' apply_chat_template(add_generation_prompt=True) gives it.
std::vector<int32_t> chat_prompt_ids(const std::string& prompt, const SampleText& text) {
  if (!text.hf)
    throw Error(ErrorKind::Usage, "dsx sample --chat needs a Hugging Face tokenizer (the model folder's or --tokenizer DIR)");
  const auto chat = tokenizer::read_chat_template(text.hf_folder);
  if (!chat)
    throw Error(ErrorKind::Usage, "dsx sample --chat: " + text.hf_folder +
                                      " has no chat template (chat_template.jinja, or chat_template in "
                                      "tokenizer_config.json); sample without --chat, or give --tokenizer DIR with one");
  jinja::Dict turn;
  turn.set("role", "user");
  turn.set("content", prompt);
  tokenizer::EncodeOptions templated;
  templated.add_special_tokens = false;  // the template wrote BOS where the model wants one
  return text.hf->encode(chat->render({jinja::Value(turn)}, true).text, templated);
}

std::vector<int32_t> prompt_ids(const po::variables_map& v, const SampleText& text, const models::ModelShape& shape) {
  std::vector<int32_t> prompt;
  if (v["chat"].as<bool>()) {
    if (v.count("prompt-tokens")) throw Error(ErrorKind::Usage, "dsx sample: give --chat or --prompt-tokens, not both");
    prompt = chat_prompt_ids(v["prompt"].as<std::string>(), text);
  } else if (v.count("prompt-tokens")) {
    prompt = parse_token_ids(v["prompt-tokens"].as<std::string>());
  } else if (text.hf || text.bytes) {
    prompt = text.encode(v["prompt"].as<std::string>());
    if (prompt.empty() && text.hf && text.hf->bos_id()) prompt = {*text.hf->bos_id()};
  } else if (shape.vocab_size() == 50257) {
    prompt = {50256};  // GPT-2's <|endoftext|>: an unconditional sample, as llm.c does
  } else {
    throw Error(ErrorKind::Usage, "dsx sample: this model has no tokenizer beside it; give --tokenizer DIR (a Hugging "
                                  "Face tokenizer folder) or --prompt-tokens ids");
  }
  if (prompt.empty()) throw Error(ErrorKind::Usage, "dsx sample: the prompt is empty");
  for (int32_t t : prompt)
    if (t < 0 || t >= shape.vocab_size())
      throw Error(ErrorKind::Usage, "dsx sample: prompt token " + std::to_string(t) + " is outside the vocabulary [0, " +
                                        std::to_string(shape.vocab_size()) + ")");
  return prompt;
}

// --lora-adapter: the base with the adapter applied. A QLoRA base (a bitsandbytes 4-bit folder, or
// --load-in-4bit) is held in NF4 and computes as it trained, its projections dequantised tile by tile.
std::unique_ptr<models::LoraModel> adapted_model(const po::variables_map& v, const models::ModelSource& source,
                                                bool qlora, int max_seq) {
  const std::string dir = v["lora-adapter"].as<std::string>();
  models::ModelBuildOptions options;
  options.max_batch = 1, options.max_seq = max_seq;
  const models::LoraConfig lora = models::read_peft_adapter_config(dir + "/adapter_config.json");
  if (!qlora) return models::make_lora_model(source.shape, source.initial, lora, options);
  models::Nf4LoadOptions quantization;
  quantization.double_quant = v["bnb-4bit-use-double-quant"].as<bool>();
  quantization.compute = models::bnb_compute_dtype(v["bnb-4bit-compute-dtype"].as<std::string>());
  return models::make_qlora_model(source, lora, quantization, options);
}

// A QLoRA base is sampled with its adapter; its weights are read as NF4, so only its shape here.
bool wants_qlora_sample(const po::variables_map& v) {
  const std::string weights = v["weights"].as<std::string>();
  const bool load_in_4bit = v["load-in-4bit"].as<bool>();
  const bool bnb = std::filesystem::is_directory(weights) && models::hf_folder_is_bnb_4bit(weights);
  if ((load_in_4bit || bnb) && !v.count("lora-adapter"))
    throw Error(ErrorKind::Usage, "dsx sample: " + (bnb ? "'" + weights + "' is saved with bitsandbytes 4-bit"
                                                        : std::string("--load-in-4bit")) +
                                      ": dsx samples an NF4 base with the adapter trained on it; add --lora-adapter "
                                      "DIR (or sample the merged model that dsx export --merged writes)");
  if ((load_in_4bit || bnb) && (v.count("add") || v.count("eval-add")))
    throw Error(ErrorKind::Usage, "dsx sample: --add/--eval-add sample a dense model, not a QLoRA base");
  return load_in_4bit || bnb;
}

}  // namespace

int run_sample(int argc, char** argv) {
  po::options_description options("dsx sample");
  options.add_options()
      ("weights", po::value<std::string>()->required(),
       "a Hugging Face model folder (what dsx train --save and dsx export write), or GPT-2 weights: llm.c .bin "
       "(fp32/bf16) or .safetensors")
      ("prompt", po::value<std::string>()->default_value("\n", "\"\\n\""), "prompt text (through the model's tokenizer, or bytes "
       "for byte-level models)")
      ("prompt-tokens", po::value<std::string>(), "prompt as comma-separated token ids")
      ("chat", po::bool_switch(), "send the prompt as a user turn through the model's chat template and print the "
       "answer alone")
      ("tokens", po::value<int>()->default_value(128), "tokens to generate")
      ("temperature", po::value<float>()->default_value(1.0f), "sampling temperature; 0 is greedy")
      ("top-k", po::value<int>()->default_value(0), "sample among the k most likely tokens (0: all)")
      ("seed", po::value<uint64_t>()->default_value(0), "random seed")
      ("tokenizer", po::value<std::string>(), "a Hugging Face tokenizer folder (tokenizer.json or tokenizer.model), "
       "or llm.c's gpt2_tokenizer.bin to print GPT-2 tokens as text; default: the model folder's")
      ("heads", po::value<int>()->default_value(0), "attention heads, if a GPT-2 weights file does not say")
      ("lora-adapter", po::value<std::string>(), "a PEFT adapter folder (adapter_config.json, "
       "adapter_model.safetensors: what dsx train --lora --save writes) applied to the base model; over a "
       "bitsandbytes 4-bit folder the base is held in NF4 (QLoRA)")
      ("load-in-4bit", po::bool_switch(), "with --lora-adapter: quantise the base to NF4 at load, as dsx train "
       "--load-in-4bit did for the adapter (QLoRA)")
      ("bnb-4bit-use-double-quant", po::bool_switch(), "with --load-in-4bit: as dsx train's flag")
      ("bnb-4bit-compute-dtype", po::value<std::string>()->default_value("float32"),
       "with --load-in-4bit: as dsx train's flag (bfloat16 | float16 | float32)")
      ("add", po::value<std::string>(), "ask the addition model A+B (greedy) and check the answer")
      ("eval-add", po::value<int>(), "exact-match accuracy on this many held-out addition problems")
      ("digits", po::value<int>()->default_value(2), "operand digits of the addition task");
  po::positional_options_description positional;
  positional.add("weights", 1);
  auto args = parse_args(argc, argv, "dsx sample [--weights] FILE|DIR [options]", options, &positional);
  if (args.help) return 0;
  const auto& v = args.vars;

  const bool qlora = wants_qlora_sample(v);
  const models::ModelSource source = qlora ? models::qlora_model_source(v["weights"].as<std::string>())
                                           : load_for_sampling(v["weights"].as<std::string>(), v["heads"].as<int>());
  const int tokens = v["tokens"].as<int>();
  if (tokens < 0) throw Error(ErrorKind::Usage, "dsx sample: --tokens must be >= 0");
  if (v.count("add") || v.count("eval-add")) return sample_addition(v, source);

  const SampleText text = sample_text(v, source);
  const std::vector<int32_t> prompt = prompt_ids(v, text, source.shape);
  const int max_seq = std::min<int>(source.shape.max_seq_len(), static_cast<int>(prompt.size()) + tokens);
  std::unique_ptr<models::Model> model;
  std::unique_ptr<LocalParams<float>> adapted;
  if (v.count("lora-adapter")) {
    model = adapted_model(v, source, qlora, max_seq);
    adapted = std::make_unique<LocalParams<float>>(*model);
    models::read_peft_adapter_weights(v["lora-adapter"].as<std::string>(), model->params(), adapted->params());
  } else {
    model = models::build_host_model(source.shape, 1, max_seq);
    adapted = std::make_unique<LocalParams<float>>(*model);
    std::copy(source.initial.begin(), source.initial.end(), adapted->params());
  }
  LocalParams<float>& params = *adapted;
  models::SampleOptions o;
  o.max_new_tokens = tokens, o.temperature = v["temperature"].as<float>(), o.top_k = v["top-k"].as<int>();
  o.seed = v["seed"].as<uint64_t>();
  if (text.llmc) o.stop_tokens = {text.llmc->eot_token()};
  if (text.hf) {
    // EOS, and the end-of-turn tokens generation_config.json lists beside it (chat models').
    if (text.hf->eos_id()) o.stop_tokens.push_back(*text.hf->eos_id());
    for (int32_t id : tokenizer::generation_stop_ids(text.hf_folder)) o.stop_tokens.push_back(id);
  }
  const std::vector<int32_t> out = models::generate(*model, params, prompt, o);
  // A tokenizer's text starts with the prompt text, so the continuation reads as one piece; a
  // chat answer, or the text after prompt ids, stands alone.
  const bool echo = text.hf && !v["chat"].as<bool>() && !v.count("prompt-tokens");
  std::cout << (echo ? v["prompt"].as<std::string>() + text.continuation(prompt, out) : text.decode(out)) << std::endl;
  return 0;
}

}  // namespace dsx::tools
