// Hugging Face Llama-family folders: the fixtures of tests/models/data/ (made by transformers,
// compat/make_llama_fixtures.py) read with the values transformers holds, written and read back
// (fp32 exactly, bf16/fp16 within their rounding, in shards with an index), config.json read in
// both transformers generations' spellings and written back, every refusal on a real file, and
// the CPU model's logits, loss and gradients on each fixture against transformers' float64 ones.
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>

#include "dsx/error.h"
#include "models/io/gpt2_weights.h"
#include "models/io/hf_folder.h"
#include "models/io/safetensors.h"
#include "models/llama/hf_config.h"
#include "models/llama/llama_cpu.h"
#include "models/local_params.h"
#include "tests/models/json_token_rows.h"
#include "tests/models/temp_dir.h"

using namespace dsx::models;
using dsx::ErrorKind;
using dsx::kernels::DType;
using dsx::test::rows_of;
namespace fs = std::filesystem;

namespace {

const char* const kFixtures[] = {"llama", "llama_bf16", "mistral", "qwen2", "qwen2_sharded"};

std::string fixture(const std::string& name) {
  return std::string(DSX_SOURCE_DIR) + "/tests/models/data/" + name;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

rapidjson::Document json_of(const std::string& path) {
  rapidjson::Document d;
  d.Parse(read_file(path).c_str());
  EXPECT_FALSE(d.HasParseError()) << path;
  return d;
}

// The error f throws, checked for its kind and for naming each of `names`.
template <class F>
std::string error_of(F&& f, ErrorKind kind, const std::vector<std::string>& names) {
  try {
    f();
  } catch (const dsx::Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (const auto& n : names)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << n << " in: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

// `json` with each (key, raw JSON value) set, or removed where the value is empty.
std::string edited(const std::string& json,
                   const std::vector<std::pair<std::string, std::string>>& changes) {
  rapidjson::Document d;
  d.Parse(json.c_str());
  for (const auto& [key, raw] : changes) {
    d.RemoveMember(key.c_str());
    if (raw.empty()) continue;
    rapidjson::Document v(&d.GetAllocator());
    v.Parse(raw.c_str());
    d.AddMember(rapidjson::Value(key.c_str(), d.GetAllocator()),
                rapidjson::Value(v, d.GetAllocator()), d.GetAllocator());
  }
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  d.Accept(w);
  return sb.GetString();
}

// A transformers 4.x-style config.json (top-level rope_theta, rope_scaling, torch_dtype).
const std::string kLlama4x = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
  "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256,
  "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "rope_scaling": null, "tie_word_embeddings": false,
  "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "torch_dtype": "bfloat16"})";
const std::string kMistral = edited(kLlama4x, {{"architectures", R"(["MistralForCausalLM"])"},
                                               {"model_type", R"("mistral")"},
                                               {"sliding_window", "null"}});
const std::string kQwen2 = edited(kLlama4x, {{"architectures", R"(["Qwen2ForCausalLM"])"},
                                             {"model_type", R"("qwen2")"},
                                             {"use_sliding_window", "false"}});

bool same_config(const LlamaConfig& a, const LlamaConfig& b) {
  const RopeScaling &r = a.rope_scaling, &s = b.rope_scaling;
  const bool rope =
      r.kind == s.kind && (r.kind == RopeScaling::Kind::None || r.factor == s.factor) &&
      (r.kind != RopeScaling::Kind::Llama3 ||
       (r.low_freq_factor == s.low_freq_factor && r.high_freq_factor == s.high_freq_factor &&
        r.original_max_position_embeddings == s.original_max_position_embeddings));
  return rope && a.architecture == b.architecture && a.model_type == b.model_type &&
         a.vocab_size == b.vocab_size && a.hidden_size == b.hidden_size &&
         a.intermediate_size == b.intermediate_size && a.num_layers == b.num_layers &&
         a.num_heads == b.num_heads && a.num_kv_heads == b.num_kv_heads &&
         a.head_dim == b.head_dim && a.max_position_embeddings == b.max_position_embeddings &&
         a.sliding_window == b.sliding_window &&
         a.rms_norm_eps == b.rms_norm_eps && a.rope_theta == b.rope_theta &&
         a.tie_word_embeddings == b.tie_word_embeddings && a.qkv_bias == b.qkv_bias &&
         a.o_bias == b.o_bias && a.bos_token_id == b.bos_token_id &&
         a.eos_token_id == b.eos_token_id;
}

float rounded(float v, DType d) {
  using namespace dsx::kernels;
  return d == DType::BF16  ? bf16_to_float(float_to_bf16(v))
         : d == DType::F16 ? fp16_to_float(float_to_fp16(v))
                           : v;
}

class HfFolder : public ::testing::Test {
 protected:
  dsx::test::TempDir tmp;
  // A copy of a fixture folder in the scratch directory, to damage.
  std::string copy_of(const std::string& name) {
    const std::string dst = tmp.file(name + "-" + std::to_string(copies_++));
    fs::copy(fixture(name), dst, fs::copy_options::recursive);
    return dst;
  }
  LlamaHfConfig parse_file(const std::string& json) {
    write_file(tmp.file("config.json"), json);
    return read_llama_hf_config(tmp.file("config.json"));
  }
  std::string config_path() { return tmp.file("config.json"); }

 private:
  int copies_ = 0;
};

// Rewrites a safetensors file keeping the tensors `keep` accepts, then adding `extra`.
void rewrite(const std::string& path, const std::function<bool(const std::string&)>& keep,
             const std::vector<std::pair<std::string, std::vector<float>>>& extra = {},
             const std::vector<std::vector<int64_t>>& extra_shapes = {}) {
  SafetensorsWriter w;
  {
    SafetensorsReader r(path);
    for (const auto& [name, t] : r.tensors())
      if (keep(name)) w.add(name, t.dtype, t.shape, t.data, t.bytes);
  }
  for (size_t i = 0; i < extra.size(); ++i)
    w.add(extra[i].first, "F32", extra_shapes[i], extra[i].second.data(),
          extra[i].second.size() * 4);
  w.set_metadata("format", "pt");
  w.write(path);
}

}  // namespace

// ---- the fixtures as transformers wrote them ----

TEST_F(HfFolder, FixturesReadWithTheirConfigAndTheValuesTransformersHolds) {
  for (const char* name : kFixtures) {
    SCOPED_TRACE(name);
    EXPECT_EQ(hf_folder_kind(fixture(name)), HfFolderKind::Llama);
    LlamaWeights w = read_llama_hf_folder(fixture(name));
    const auto expected = json_of(fixture(name) + "/expected.json");
    const auto specs = llama_param_specs(w.config);
    ASSERT_EQ(specs.size(), expected["param_sums"].MemberCount());  // the same parameters, no more
    for (const ParamSpec& s : specs) {
      ASSERT_TRUE(expected["param_sums"].HasMember(s.name.c_str())) << s.name;
      double sum = 0;
      for (size_t i = 0; i < s.numel; ++i) sum += w.params[s.offset + i];
      EXPECT_NEAR(sum, expected["param_sums"][s.name.c_str()].GetDouble(), 1e-9 * (1 + s.numel))
          << s.name;
      const auto& head = expected["param_head"][s.name.c_str()];
      for (rapidjson::SizeType i = 0; i < head.Size(); ++i)
        EXPECT_EQ(w.params[s.offset + i], static_cast<float>(head[i].GetDouble()))
            << s.name << " [" << i << "]";
    }
  }
}

TEST_F(HfFolder, FixtureConfigsSayWhatTheyWereMadeWith) {
  const LlamaConfig llama = read_llama_hf_folder(fixture("llama")).config;
  EXPECT_EQ(llama.architecture, "LlamaForCausalLM");
  EXPECT_EQ(llama.num_heads, 4);
  EXPECT_EQ(llama.num_kv_heads, 2);
  EXPECT_EQ(llama.head_dim, 8);
  EXPECT_EQ(llama.rope_scaling.kind, RopeScaling::Kind::Llama3);  // 5.x's rope_parameters spelling
  EXPECT_EQ(llama.rope_scaling.factor, 8.0);
  EXPECT_EQ(llama.rope_scaling.original_max_position_embeddings, 128);
  EXPECT_EQ(llama.rope_theta, 10000.0);
  EXPECT_EQ(llama.rms_norm_eps, 1e-5);
  EXPECT_FALSE(llama.tie_word_embeddings);
  EXPECT_FALSE(llama.qkv_bias);
  EXPECT_EQ(read_llama_hf_folder(fixture("llama_bf16")).torch_dtype, "bfloat16");
  const LlamaConfig mistral = read_llama_hf_folder(fixture("mistral")).config;
  EXPECT_EQ(mistral.model_type, "mistral");
  EXPECT_EQ(mistral.head_dim, 16);  // not hidden / heads = 8
  EXPECT_EQ(mistral.num_kv_heads, 1);
  EXPECT_EQ(mistral.rope_theta, 1e6);
  const LlamaWeights qwen2 = read_llama_hf_folder(fixture("qwen2"));
  EXPECT_EQ(qwen2.config.model_type, "qwen2");
  EXPECT_TRUE(qwen2.config.qkv_bias);
  EXPECT_FALSE(qwen2.config.o_bias);
  EXPECT_TRUE(qwen2.config.tie_word_embeddings);
  EXPECT_EQ(qwen2.config.bos_token_id, -1);  // null
  EXPECT_EQ(qwen2.config.eos_token_id, 3);   // [3, 4]: the first
  EXPECT_EQ(qwen2.torch_dtype, "float32");
  EXPECT_EQ(read_llama_hf_folder(fixture("qwen2_sharded")).params, qwen2.params);
}

TEST_F(HfFolder, Bf16FixtureIsTheFp32OneRounded) {
  const LlamaWeights f32 = read_llama_hf_folder(fixture("llama")),
                     bf16 = read_llama_hf_folder(fixture("llama_bf16"));
  EXPECT_TRUE(same_config(f32.config, bf16.config));
  ASSERT_EQ(f32.params.size(), bf16.params.size());
  for (size_t i = 0; i < f32.params.size(); ++i)
    ASSERT_EQ(bf16.params[i], rounded(f32.params[i], DType::BF16)) << i;
}

// ---- writing ----

TEST_F(HfFolder, RoundTripIsExactInFp32AndRoundedInBf16AndFp16) {
  for (const char* name : {"llama", "mistral", "qwen2"}) {
    SCOPED_TRACE(name);
    const LlamaWeights w = read_llama_hf_folder(fixture(name));
    for (DType d : {DType::F32, DType::BF16, DType::F16}) {
      const std::string out = tmp.file(std::string(name) + dsx::kernels::dtype_name(d));
      write_llama_hf_folder(out, w.config, w.params.data(), {d, kDefaultMaxShardBytes, ""});
      const LlamaWeights back = read_llama_hf_folder(out);
      EXPECT_TRUE(same_config(back.config, w.config));
      EXPECT_EQ(back.torch_dtype, d == DType::F32    ? "float32"
                                  : d == DType::BF16 ? "bfloat16"
                                                     : "float16");
      ASSERT_EQ(back.params.size(), w.params.size());
      for (size_t i = 0; i < w.params.size(); ++i)
        ASSERT_EQ(back.params[i], rounded(w.params[i], d)) << i;
      SafetensorsReader st(out + "/model.safetensors");
      EXPECT_EQ(st.metadata().at("format"), "pt");
      EXPECT_EQ(st.find("lm_head.weight") != nullptr,
                !w.config.tie_word_embeddings);  // absent when tied
    }
  }
}

TEST_F(HfFolder, LargeModelsAreShardedWithAnIndex) {
  const LlamaWeights w = read_llama_hf_folder(fixture("llama"));
  const std::string out = tmp.file("sharded");
  write_llama_hf_folder(out, w.config, w.params.data(), {DType::F32, 20000, ""});
  EXPECT_FALSE(fs::exists(out + "/model.safetensors"));
  const auto index = json_of(out + "/model.safetensors.index.json");
  const auto specs = llama_param_specs(w.config);
  size_t bytes = 0;
  for (const auto& s : specs) bytes += s.numel * 4;
  EXPECT_EQ(index["metadata"]["total_size"].GetUint64(), bytes);
  ASSERT_EQ(index["weight_map"].MemberCount(), specs.size());
  std::set<std::string> files;
  for (const auto& m : index["weight_map"].GetObject()) files.insert(m.value.GetString());
  ASSERT_GT(files.size(), 2u);
  const std::string n = std::to_string(files.size());
  for (size_t k = 1; k <= files.size(); ++k) {
    char want[64];
    std::snprintf(want, sizeof(want), "model-%05zu-of-%05zu.safetensors", k, files.size());
    EXPECT_TRUE(files.count(want)) << want;
    EXPECT_LE(fs::file_size(out + "/" + want), 20000u + 4096u);  // limit plus a header
  }
  EXPECT_EQ(read_llama_hf_folder(out).params, w.params);
  // Saved again unsharded into the same folder: the index and shards go, the single file reads.
  write_llama_hf_folder(out, w.config, w.params.data());
  EXPECT_FALSE(fs::exists(out + "/model.safetensors.index.json"));
  for (const auto& f : files) EXPECT_FALSE(fs::exists(out + "/" + f)) << f;
  EXPECT_EQ(read_llama_hf_folder(out).params, w.params);
}

TEST_F(HfFolder, TokenizerFilesAreCopiedFromTheSourceFolder) {
  const std::string src = tmp.file("src");
  fs::create_directories(src);
  write_file(src + "/tokenizer.json", R"({"model": {"type": "BPE"}})");
  write_file(src + "/tokenizer_config.json", R"({"bos_token": "<s>"})");
  write_file(src + "/notes.txt", "not a tokenizer file");
  const LlamaWeights w = read_llama_hf_folder(fixture("qwen2"));
  HfWriteOptions o;
  o.tokenizer_from = src;
  write_llama_hf_folder(tmp.file("out"), w.config, w.params.data(), o);
  EXPECT_EQ(read_file(tmp.file("out/tokenizer.json")), read_file(src + "/tokenizer.json"));
  EXPECT_EQ(read_file(tmp.file("out/tokenizer_config.json")),
            read_file(src + "/tokenizer_config.json"));
  EXPECT_FALSE(fs::exists(tmp.file("out/notes.txt")));
  EXPECT_FALSE(fs::exists(tmp.file("out/tokenizer.model")));
  o.tokenizer_from = tmp.file("nowhere");
  error_of([&] { write_llama_hf_folder(tmp.file("out2"), w.config, w.params.data(), o); },
           ErrorKind::Io, {"nowhere"});
}

TEST_F(HfFolder, ConfigJsonWrittenReadsBackAsTheSameConfig) {
  for (const char* name : {"llama", "mistral", "qwen2"}) {
    const LlamaConfig c = read_llama_hf_folder(fixture(name)).config;
    EXPECT_TRUE(
        same_config(parse_llama_hf_config(llama_hf_config_json(c, "float32"), "x").config, c))
        << name;
  }
  LlamaConfig c = parse_file(kLlama4x).config;
  c.qkv_bias = c.o_bias = true;
  c.rope_scaling.kind = RopeScaling::Kind::Linear;
  c.rope_scaling.factor = 2.5;
  c.bos_token_id = -1;
  const LlamaConfig back = parse_llama_hf_config(llama_hf_config_json(c, "bfloat16"), "x").config;
  EXPECT_TRUE(same_config(back, c));
  c.o_bias = false;  // q/k/v bias without o: a Llama config.json cannot say that
  error_of([&] { llama_hf_config_json(c, "float32"); }, ErrorKind::Unsupported, {"attention_bias"});
  c.o_bias = true;
  c.model_type = "mistral";  // with architecture LlamaForCausalLM
  error_of([&] { llama_hf_config_json(c, "float32"); }, ErrorKind::Unsupported,
           {"LlamaForCausalLM", "mistral"});
}

// ---- folders refused ----

TEST_F(HfFolder, MissingOrDamagedFilesAreNamed) {
  const std::string dir = copy_of("llama");
  fs::remove(dir + "/config.json");
  error_of([&] { read_llama_hf_folder(dir); }, ErrorKind::Io, {dir + "/config.json"});
  error_of([&] { hf_folder_kind(dir); }, ErrorKind::Io, {"config.json"});
  const std::string no_weights = copy_of("qwen2");
  fs::remove(no_weights + "/model.safetensors");
  error_of([&] { read_llama_hf_folder(no_weights); }, ErrorKind::Io,
           {no_weights, "model.safetensors"});
  const std::string cut = copy_of("mistral");
  const std::string bytes = read_file(cut + "/model.safetensors");
  write_file(cut + "/model.safetensors", bytes.substr(0, bytes.size() / 2));
  error_of([&] { read_llama_hf_folder(cut); }, ErrorKind::Format,
           {cut + "/model.safetensors", "truncated"});
  const std::string shards = copy_of("qwen2_sharded");
  fs::remove(shards + "/model-00003-of-00004.safetensors");
  error_of([&] { read_llama_hf_folder(shards); }, ErrorKind::Io,
           {"model-00003-of-00004.safetensors", "missing"});
  write_file(shards + "/model.safetensors.index.json", "{\"weight_map\": 3}");
  error_of([&] { read_llama_hf_folder(shards); }, ErrorKind::Format,
           {"model.safetensors.index.json"});
}

TEST_F(HfFolder, TensorsMustMatchTheConfigExactly) {
  const std::string shape = copy_of("llama");
  write_file(shape + "/config.json",
             edited(read_file(shape + "/config.json"), {{"intermediate_size", "40"}}));
  error_of([&] { read_llama_hf_folder(shape); }, ErrorKind::Format,
           {"mlp.gate_proj.weight", "[48, 32]", "[40, 32]"});
  const std::string layers = copy_of("mistral");
  write_file(layers + "/config.json",
             edited(read_file(layers + "/config.json"), {{"num_hidden_layers", "3"}}));
  error_of([&] { read_llama_hf_folder(layers); }, ErrorKind::Format,
           {layers + "/config.json' says num_hidden_layers 3", "weights hold 2 layers"});
  const std::string missing = copy_of("qwen2");
  rewrite(missing + "/model.safetensors",
          [](const std::string& n) { return n != "model.layers.1.mlp.down_proj.weight"; });
  error_of([&] { read_llama_hf_folder(missing); }, ErrorKind::Format,
           {"model.layers.1.mlp.down_proj.weight", "missing"});
  const std::string extra = copy_of("llama");
  rewrite(extra + "/model.safetensors", [](const std::string&) { return true; },
          {{"model.layers.0.mlp.up_proj.bias", std::vector<float>(48)}}, {{48}});
  error_of([&] { read_llama_hf_folder(extra); }, ErrorKind::Format,
           {"model.layers.0.mlp.up_proj.bias"});
  const std::string ints = copy_of("qwen2");
  {
    SafetensorsWriter w;
    SafetensorsReader r(ints + "/model.safetensors");
    for (const auto& [name, t] : r.tensors())
      w.add(name, name == "model.norm.weight" ? "I32" : t.dtype, t.shape, t.data, t.bytes);
    w.write(ints + "/model.safetensors");
  }
  error_of([&] { read_llama_hf_folder(ints); }, ErrorKind::Format, {"model.norm.weight", "I32"});
}

TEST_F(HfFolder, KnownBuffersAndAnEqualTiedHeadAreAccepted) {
  const LlamaWeights w = read_llama_hf_folder(fixture("qwen2"));
  const std::string dir = copy_of("qwen2");
  const std::vector<float> embedding(w.params.begin(), w.params.begin() + 64 * 32);
  rewrite(dir + "/model.safetensors", [](const std::string&) { return true; },
          {{"model.layers.0.self_attn.rotary_emb.inv_freq", std::vector<float>(4, 1.0f)},
           {"lm_head.weight", embedding}},
          {{4}, {64, 32}});
  EXPECT_EQ(read_llama_hf_folder(dir).params, w.params);
  std::vector<float> other = embedding;
  other[5] += 1;
  rewrite(dir + "/model.safetensors", [](const std::string& n) { return n != "lm_head.weight"; },
          {{"lm_head.weight", other}}, {{64, 32}});
  error_of([&] { read_llama_hf_folder(dir); }, ErrorKind::Format,
           {"lm_head.weight", "tie_word_embeddings"});
}

TEST_F(HfFolder, FolderKindTellsGpt2FromLlamaAndRefusesOthers) {
  write_gpt2_hf_config(tmp.file("config.json"), GPT2Config{});
  EXPECT_EQ(hf_folder_kind(tmp.path()), HfFolderKind::Gpt2);
  EXPECT_FALSE(hf_folder_is_llama_family(tmp.path()));
  EXPECT_TRUE(hf_folder_is_llama_family(fixture("mistral")));
  write_file(tmp.file("config.json"),
             R"({"architectures": ["GemmaForCausalLM"], "model_type": "gemma"})");
  error_of([&] { hf_folder_kind(tmp.path()); }, ErrorKind::Unsupported,
           {"GemmaForCausalLM", "LlamaForCausalLM"});
  EXPECT_FALSE(hf_folder_is_llama_family(tmp.path()));
}

// ---- config.json ----

TEST_F(HfFolder, ConfigReadsTransformers4Spelling) {
  const LlamaHfConfig h = parse_file(edited(
      kLlama4x, {{"rope_scaling", R"({"type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                     "high_freq_factor": 4.0, "original_max_position_embeddings": 64})"},
                 {"eos_token_id", "[7, 8, 9]"},
                 {"bos_token_id", "null"}}));
  const LlamaConfig& c = h.config;
  EXPECT_EQ(h.torch_dtype, "bfloat16");
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.kind, RopeScaling::Kind::Llama3);
  EXPECT_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 64);
  EXPECT_EQ(c.eos_token_id, 7);
  EXPECT_EQ(c.bos_token_id, -1);
  EXPECT_EQ(c.head_dim, 8);  // hidden / heads
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  // linear, by its old "type" key; rope_scaling wins over rope_parameters as in transformers.
  const LlamaConfig lin =
      parse_file(edited(kLlama4x, {{"rope_scaling", R"({"type": "linear", "factor": 2.0})"},
                                   {"rope_parameters", R"({"rope_type": "default"})"}}))
          .config;
  EXPECT_EQ(lin.rope_scaling.kind, RopeScaling::Kind::Linear);
  EXPECT_EQ(lin.rope_scaling.factor, 2.0);
  // llama3 without original_max_position_embeddings: max_position_embeddings, as transformers fills
  // it.
  const LlamaConfig l3 =
      parse_file(edited(kLlama4x, {{"rope_scaling", R"({"rope_type": "llama3", "factor": 8,
      "low_freq_factor": 1, "high_freq_factor": 4})"}}))
          .config;
  EXPECT_EQ(l3.rope_scaling.original_max_position_embeddings, 256);
}

TEST_F(HfFolder, ConfigDefaultsAreEachModelTypesOwn) {
  const LlamaConfig llama = parse_file(edited(kLlama4x, {{"num_key_value_heads", ""},
                                                         {"max_position_embeddings", ""},
                                                         {"rope_theta", ""},
                                                         {"rms_norm_eps", ""},
                                                         {"bos_token_id", ""},
                                                         {"tie_word_embeddings", ""},
                                                         {"head_dim", "16"}}))
                                .config;
  EXPECT_EQ(llama.num_kv_heads, 4);  // = heads
  EXPECT_EQ(llama.head_dim, 16);
  EXPECT_EQ(llama.max_position_embeddings, 2048);
  EXPECT_EQ(llama.rope_theta, 10000.0);
  EXPECT_EQ(llama.rms_norm_eps, 1e-6);
  EXPECT_EQ(llama.rope_theta, LlamaConfig{}.rope_theta);  // the reader's default is the struct's
  EXPECT_EQ(llama.rms_norm_eps, LlamaConfig{}.rms_norm_eps);
  EXPECT_EQ(llama.bos_token_id, 1);
  EXPECT_FALSE(llama.tie_word_embeddings);
  // MistralConfig: 8 kv heads when the key is absent, a 4096 window (fine below 4096 positions).
  const LlamaConfig mistral = parse_file(edited(kMistral, {{"num_attention_heads", "16"},
                                                           {"hidden_size", "64"},
                                                           {"num_key_value_heads", ""},
                                                           {"sliding_window", ""},
                                                           {"max_position_embeddings", "4096"}}))
                                  .config;
  EXPECT_EQ(mistral.num_kv_heads, 8);
  EXPECT_FALSE(mistral.qkv_bias);
  // Qwen2Config: 32 kv heads when the key is absent.
  const LlamaConfig qwen2_kv = parse_file(edited(kQwen2, {{"num_attention_heads", "32"},
                                                          {"hidden_size", "256"},
                                                          {"num_key_value_heads", ""}}))
                                   .config;
  EXPECT_EQ(qwen2_kv.num_kv_heads, 32);
  const LlamaConfig qwen2 = parse_file(edited(kQwen2, {{"bos_token_id", ""},
                                                       {"eos_token_id", ""},
                                                       {"attention_bias", "false"},
                                                       {"sliding_window", "16"}}))
                                .config;
  EXPECT_TRUE(qwen2.qkv_bias);  // always, whatever attention_bias says
  EXPECT_FALSE(qwen2.o_bias);
  EXPECT_EQ(qwen2.bos_token_id, -1);
  EXPECT_EQ(qwen2.eos_token_id, -1);
  const LlamaConfig biased = parse_file(edited(kLlama4x, {{"attention_bias", "true"}})).config;
  EXPECT_TRUE(biased.qkv_bias && biased.o_bias);
}

TEST_F(HfFolder, OtherArchitecturesAreRefusedByName) {
  for (const char* arch :
       {"GemmaForCausalLM", "PhiForCausalLM", "LlamaForSequenceClassification"}) {
    const std::string json = edited(
        kLlama4x, {{"architectures", "[\"" + std::string(arch) + "\"]"}, {"model_type", ""}});
    error_of([&] { parse_file(json); }, ErrorKind::Unsupported,
             {config_path(), arch, "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM"});
  }
  error_of(
      [&] {
        parse_file(edited(kLlama4x, {{"architectures", ""}, {"model_type", "\"phi\""}}));
      },
      ErrorKind::Unsupported, {"phi", "supported"});
  error_of(
      [&] {
        parse_file(edited(kLlama4x, {{"model_type", "\"qwen2\""}}));
      },
      ErrorKind::Config, {config_path(), "model_type", "qwen2", "LlamaForCausalLM"});
}

TEST_F(HfFolder, SettingsDsxCannotComputeExactlyAreRefused) {
  struct Case {
    std::string json;
    std::vector<std::string> names;
  };
  const std::vector<Case> cases = {
      {edited(kLlama4x, {{"rope_scaling", R"({"rope_type": "yarn", "factor": 4.0})"}}),
       {"rope_scaling.rope_type", "yarn"}},
      {edited(kLlama4x, {{"rope_parameters", R"({"rope_type": "dynamic", "factor": 2.0})"}}),
       {"rope_parameters.rope_type", "dynamic"}},
      {edited(kLlama4x,
              {{"rope_scaling",
                R"({"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": 0.5})"}}),
       {"partial_rotary_factor"}},
      {edited(kLlama4x, {{"mlp_bias", "true"}}), {"mlp_bias"}},
      {edited(kLlama4x, {{"hidden_act", "\"gelu\""}}), {"hidden_act", "gelu"}},
      {edited(kLlama4x, {{"attention_dropout", "0.1"}}), {"attention_dropout"}},
      {edited(kLlama4x, {{"quantization_config", R"({"quant_method": "gptq"})"}}),
       {"quantization_config"}},
      {edited(kQwen2, {{"use_sliding_window", "true"}, {"sliding_window", "16"}}),
       {"sliding_window", "16", "use_sliding_window"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.json);
    std::vector<std::string> names = c.names;
    names.push_back(config_path());
    error_of([&] { parse_file(c.json); }, ErrorKind::Unsupported, names);
  }
  // A window no shorter than max_position_embeddings is full causal attention exactly.
  EXPECT_EQ(longest_exact_sequence(parse_file(edited(kMistral, {{"sliding_window", "256"}})).config), 256);
  EXPECT_NO_THROW(
      parse_file(edited(kQwen2, {{"use_sliding_window", "false"}, {"sliding_window", "16"}})));
}

TEST_F(HfFolder, BadValuesNameTheFileAndTheKey) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {edited(kLlama4x, {{"num_attention_heads", "\"4\""}}), "num_attention_heads"},
      {edited(kLlama4x, {{"vocab_size", "-1"}}), "vocab_size"},
      {edited(kLlama4x, {{"hidden_size", ""}}), "hidden_size"},
      {edited(kLlama4x, {{"num_key_value_heads", "3"}}), "num_key_value_heads"},
      {edited(kLlama4x, {{"head_dim", "7"}}), "head_dim"},
      {edited(kLlama4x, {{"rms_norm_eps", "0"}}), "rms_norm_eps"},
      {edited(kLlama4x, {{"rope_theta", "\"big\""}}), "rope_theta"},
      {edited(kLlama4x, {{"tie_word_embeddings", "1"}}), "tie_word_embeddings"},
      {edited(kLlama4x, {{"eos_token_id", "\"two\""}}), "eos_token_id"},
      {edited(kLlama4x, {{"rope_scaling", "\"llama3\""}}), "rope_scaling"},
      {edited(kLlama4x, {{"rope_scaling", R"({"rope_type": "llama3", "factor": 8})"}}),
       "rope_scaling.low_freq_factor"},
      {edited(kLlama4x,
              {{"rope_scaling", R"({"rope_type": "llama3", "factor": 8, "low_freq_factor": 4,
                                             "high_freq_factor": 4})"}}),
       "rope_scaling.high_freq_factor"},
      {edited(kLlama4x, {{"rope_scaling", R"({"rope_type": "linear"})"}}), "rope_scaling.factor"},
      {edited(kLlama4x, {{"architectures", "\"LlamaForCausalLM\""}}), "architectures"},
      {"{not json", "config.json"},
  };
  for (const auto& [json, key] : cases) {
    SCOPED_TRACE(json);
    error_of([&] { parse_file(json); }, ErrorKind::Config, {config_path(), key});
  }
  error_of([&] { read_llama_hf_config(tmp.file("absent.json")); }, ErrorKind::Io, {"absent.json"});
}

// ---- the CPU model against transformers ----

namespace {

// Within `rel` of `want`, measured against `scale` (the tensor's own size) where `want` is tiny.
void expect_close(double got, double want, double scale, double rel, const std::string& what) {
  EXPECT_LE(std::abs(got - want), rel * std::max(std::abs(want), scale))
      << what << ": " << got << " vs " << want;
}

}  // namespace

// Logits, loss and every parameter's gradient norm (and first values) of LlamaCpu<float> on each
// fixture, against transformers in float64 on the same folder: within fp32 accuracy (1e-4).
TEST_F(HfFolder, CpuModelMatchesTransformersOnEachFixture) {
  for (const char* name : kFixtures) {
    SCOPED_TRACE(name);
    const LlamaWeights w = read_llama_hf_folder(fixture(name));
    const auto e = json_of(fixture(name) + "/expected.json");
    const std::vector<int32_t> inputs = rows_of(e["inputs"]), targets = rows_of(e["targets"]);
    const int B = static_cast<int>(e["inputs"].Size()), T = static_cast<int>(inputs.size()) / B;
    LlamaCpu<float> model(w.config, B, T);
    LocalParams<float> lp(model);
    ASSERT_EQ(lp.size(), w.params.size());
    std::copy(w.params.begin(), w.params.end(), lp.params());
    const float loss = model.forward(inputs.data(), targets.data(), B, T, lp);
    expect_close(loss, e["loss"].GetDouble(), 0, 1e-4, "loss");
    const std::vector<float> logits = model.logits();
    ASSERT_EQ(logits.size(), e["logits"].Size());
    double largest = 0;
    for (const auto& v : e["logits"].GetArray())
      largest = std::max(largest, std::abs(v.GetDouble()));
    for (size_t i = 0; i < logits.size(); ++i)
      expect_close(logits[i], e["logits"][static_cast<rapidjson::SizeType>(i)].GetDouble(),
                   0.01 * largest, 1e-4, "logit " + std::to_string(i));
    lp.zero_grads();
    model.backward(lp, lp, 1.0f);
    for (const ParamSpec& s : model.params()) {
      double sq = 0;
      for (size_t i = 0; i < s.numel; ++i)
        sq += double(lp.grads()[s.offset + i]) * lp.grads()[s.offset + i];
      const double norm = e["grad_norms"][s.name.c_str()].GetDouble();
      expect_close(std::sqrt(sq), norm, 0, 1e-4, s.name + " gradient norm");
      const auto& head = e["grad_head"][s.name.c_str()];
      for (rapidjson::SizeType i = 0; i < head.Size(); ++i)
        expect_close(lp.grads()[s.offset + i], head[i].GetDouble(),
                     norm / std::sqrt(double(s.numel)), 1e-4,
                     s.name + " gradient [" + std::to_string(i) + "]");
    }
  }
}

// Configs as the Hub's Llama 3.2 1B, Qwen2 0.5B and Mistral 7B files give them (transformers 4.x
// spelling): read, and their parameter counts are the published ones.
TEST_F(HfFolder, HubStyleConfigsGiveTheirPublishedParameterCounts) {
  auto count = [](const LlamaConfig& c) {
    const auto specs = llama_param_specs(c);
    return specs.back().offset + specs.back().numel;
  };
  const LlamaHfConfig llama32 = parse_file(R"({"architectures": ["LlamaForCausalLM"],
      "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 128000, "eos_token_id": 128001,
      "head_dim": 64, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
      "intermediate_size": 8192, "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
      "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8, "pretraining_tp": 1,
      "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
      "original_max_position_embeddings": 8192, "rope_type": "llama3"}, "rope_theta": 500000.0,
      "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.45.0.dev0",
      "use_cache": true, "vocab_size": 128256})");
  EXPECT_EQ(count(llama32.config), 1235814400u);
  EXPECT_EQ(llama32.config.rope_scaling.factor, 32.0);
  EXPECT_EQ(llama32.config.bos_token_id, 128000);
  const LlamaHfConfig qwen2 =
      parse_file(R"({"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0,
      "bos_token_id": 151643, "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896,
      "initializer_range": 0.02, "intermediate_size": 4864, "max_position_embeddings": 32768,
      "max_window_layers": 24, "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
      "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768,
      "tie_word_embeddings": true, "torch_dtype": "bfloat16", "use_cache": true, "use_sliding_window": false,
      "vocab_size": 151936})");
  EXPECT_EQ(count(qwen2.config), 494032768u);
  const std::string mistral =
      R"({"architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
      "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 32768,
      "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
      "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": null, "tie_word_embeddings": false,
      "torch_dtype": "bfloat16", "vocab_size": 32000})";
  EXPECT_EQ(count(parse_file(mistral).config), 7241732096u);  // v0.2 and later: no window
  // v0.1's 4096 window over 32768 positions: trained on sequences of up to 4096 tokens.
  const LlamaConfig v01 = parse_file(edited(mistral, {{"sliding_window", "4096"}, {"rope_theta", "10000.0"}})).config;
  EXPECT_EQ(v01.sliding_window, 4096);
  EXPECT_EQ(longest_exact_sequence(v01), 4096);
}

// Mistral v0.1's sliding window: dsx's full causal attention is the window's attention exactly for
// sequences no longer than the window, so the model trains up to that length and refuses longer
// ones by name; the window is written back to config.json as it was read.
TEST_F(HfFolder, MistralSlidingWindowTrainsSequencesUpToItsLength) {
  const LlamaConfig c = parse_file(edited(kMistral, {{"sliding_window", "64"}})).config;
  EXPECT_EQ(c.sliding_window, 64);
  EXPECT_EQ(c.max_position_embeddings, 256);
  EXPECT_EQ(longest_exact_sequence(c), 64);
  EXPECT_NO_THROW(LlamaCpu<float>(c, 2, 64));
  error_of([&] { LlamaCpu<float>(c, 2, 65); }, ErrorKind::Config, {"65", "[1, 64]", "sliding_window"});
  const LlamaConfig back = parse_llama_hf_config(llama_hf_config_json(c, "float32"), "x").config;
  EXPECT_TRUE(same_config(back, c));
  EXPECT_EQ(back.sliding_window, 64);
  // MistralConfig's default window is 4096 when the key is absent; null is none.
  EXPECT_EQ(parse_file(edited(kMistral, {{"sliding_window", ""}})).config.sliding_window, 4096);
  const LlamaConfig none = parse_file(kMistral).config;
  EXPECT_EQ(none.sliding_window, 0);
  EXPECT_EQ(longest_exact_sequence(none), 256);
  EXPECT_NE(llama_hf_config_json(none, "float32").find("\"sliding_window\": null"), std::string::npos);
}
