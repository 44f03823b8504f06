// LoRA on the CPU Llama: PEFT's adapter_config.json and the --lora flag (values, refusals that
// name file and key), PEFT's initialisation, the adapted model against a float64 Llama whose
// targeted weights are merged (W + scale * B @ A), with the adapters' gradients from the merged
// weights' gradient, dropout (a mask that a checkpointed recompute repeats, off without targets),
// and PEFT adapter folders written and read back.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "dsx/error.h"
#include "models/gpt2/config.h"
#include "models/llama/llama_cpu.h"
#include "models/local_params.h"
#include "models/lora/frozen_weights.h"
#include "models/lora/lora_factory.h"
#include "models/lora/lora_llama.h"
#include "models/lora/lora_merge.h"
#include "models/lora/peft_adapter.h"
#include "tests/expect_contains.h"
#include "tests/models/random_model.h"
#include "tests/models/temp_dir.h"

using namespace dsx::models;
using namespace dsx::test;

namespace {

const std::string kFixture = std::string(DSX_SOURCE_DIR) + "/tests/models/data/llama_lora";

LlamaConfig micro_config() {
  LlamaConfig c;
  c.vocab_size = 37, c.hidden_size = 12, c.intermediate_size = 20, c.num_layers = 2;
  c.num_heads = 4, c.num_kv_heads = 2, c.head_dim = 4, c.max_position_embeddings = 8;
  c.rms_norm_eps = 1e-5, c.rope_theta = 100.0;
  return c;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const dsx::Error& e) {
    return e.what();
  }
  return "(no error)";
}

struct LoraSetup {
  static constexpr int B = 2, T = 6;
  LlamaConfig config = micro_config();
  std::vector<double> base;  // random base weights, llama_param_specs order
  std::vector<int32_t> inputs = random_tokens(B * T, 37, 11), targets = random_tokens(B * T, 37, 12);
  LoraSetup() {
    LlamaCpu<double> ref(config, 1, 1);
    base = random_vector(ref.num_params(), 3, 0.3);
  }
  std::unique_ptr<LoraLlama> lora(const LoraConfig& lc, bool checkpointing = false) const {
    std::vector<float> flat(base.begin(), base.end());
    auto frozen = std::make_unique<DenseFrozenWeights>(llama_param_specs(config), std::move(flat));
    return std::make_unique<LoraLlama>(config, lc, B, T, checkpointing, std::move(frozen));
  }
};

LoraConfig flag(const std::string& text) { return parse_lora_flag(text); }

}  // namespace

TEST(LoraConfig, ReadsPeftsOwnAdapterConfig) {
  const LoraConfig c = read_peft_adapter_config(kFixture + "/adapter_config.json");
  EXPECT_EQ(c.r, 4);
  EXPECT_EQ(c.alpha, 8);
  EXPECT_EQ(c.dropout, 0);
  EXPECT_EQ(c.target_names.size(), 7u);
  EXPECT_EQ(c.scaling(), 2.0);
  EXPECT_EQ(c.init, LoraInit::kaiming);
  // A folder given to --lora means its adapter_config.json.
  EXPECT_EQ(parse_lora_flag(kFixture).r, 4);
}

TEST(LoraConfig, RefusesWhatItCannotHonourNamingFileAndKey) {
  const auto err = [](const std::string& json) {
    return error_of([&] { parse_peft_adapter_config(json, "a/adapter_config.json"); });
  };
  EXPECT_CONTAINS(err(R"({"r": 8, "lora_alpah": 16})"), "a/adapter_config.json: key 'lora_alpah'");
  EXPECT_CONTAINS(err(R"({"peft_type": "IA3"})"), "key 'peft_type' must be \"LORA\"");
  EXPECT_CONTAINS(err(R"({"use_dora": true})"), "key 'use_dora' is a PEFT option dsx does not implement");
  EXPECT_CONTAINS(err(R"({"init_lora_weights": "pissa"})"), "key 'init_lora_weights'");
  EXPECT_CONTAINS(err(R"({"r": 0})"), "key 'r' must be a positive integer");
  EXPECT_CONTAINS(err(R"({"r": 1000000})"), "key 'r' must be a positive integer up to 65536");
  EXPECT_CONTAINS(err(R"({"lora_dropout": 1.5})"), "key 'lora_dropout'");
  EXPECT_CONTAINS(err(R"({"bias": "some"})"), "key 'bias'");
  EXPECT_CONTAINS(err(R"({"target_modules": "q_proj(("})"), "not a valid regular expression");
  EXPECT_CONTAINS(err(R"({"r": 8,)"), "a/adapter_config.json:1:");
  // Off values of unimplemented options and PEFT's bookkeeping pass.
  const LoraConfig ok = parse_peft_adapter_config(
      R"({"use_dora": false, "rank_pattern": {}, "layers_to_transform": null, "revision": null,
          "init_lora_weights": "gaussian", "use_rslora": true, "r": 16, "lora_alpha": 32})",
      "b.json");
  EXPECT_EQ(ok.init, LoraInit::gaussian);
  EXPECT_DOUBLE_EQ(ok.scaling(), 32.0 / 4.0);  // rslora: alpha / sqrt(r)
}

TEST(LoraConfig, ShortFlagForm) {
  const LoraConfig c = flag("r=8,alpha=16,dropout=0.05,targets=q_proj,v_proj,rslora=true");
  EXPECT_EQ(c.r, 8);
  EXPECT_EQ(c.alpha, 16);
  EXPECT_DOUBLE_EQ(c.dropout, 0.05);
  EXPECT_EQ(c.target_names, (std::vector<std::string>{"q_proj", "v_proj"}));
  EXPECT_TRUE(c.use_rslora);
  EXPECT_TRUE(flag("targets=all-linear").all_linear);
  EXPECT_EQ(flag(R"(targets=/.*\.(q|v)_proj/)").target_regex.value(), R"(.*\.(q|v)_proj)");
  EXPECT_CONTAINS(error_of([] { flag("r=8,rank=4"); }), "unknown key 'rank'");
  EXPECT_CONTAINS(error_of([] { flag("r=0"); }), "r must be a positive integer");
  EXPECT_CONTAINS(error_of([] { flag("r=8,q_proj"); }), "'q_proj' has no '='");
  EXPECT_CONTAINS(error_of([] { flag("alpha=x"); }), "alpha=x is not a number");
  EXPECT_CONTAINS(error_of([] { flag("/no/such/adapter_config.json"); }), "/no/such/adapter_config.json");
}

TEST(LoraConfig, MatchesModulePathsAsPeft) {
  LoraConfig c = flag("targets=q_proj,mlp.up_proj");
  EXPECT_TRUE(c.targets("model.layers.3.self_attn.q_proj", {}));
  EXPECT_TRUE(c.targets("model.layers.3.mlp.up_proj", {}));
  EXPECT_FALSE(c.targets("model.layers.3.self_attn.k_proj", {}));
  EXPECT_FALSE(c.targets("model.layers.3.self_attn.xq_proj", {}));  // a suffix counts after a dot only
  c = flag(R"(targets=/model\.layers\.1\..*/)");                   // regex: the whole path
  EXPECT_TRUE(c.targets("model.layers.1.mlp.down_proj", {}));
  EXPECT_FALSE(c.targets("model.layers.11.mlp.down_proj", {}));
  EXPECT_TRUE(LoraConfig{}.targets("model.layers.0.self_attn.v_proj", {"q_proj", "v_proj"}));
}

TEST(LoraAdapters, NamesShapesAndRefusals) {
  LoraSetup s;
  auto m = s.lora(flag("r=3,targets=q_proj,down_proj"));
  ASSERT_EQ(m->params().size(), 8u);  // 2 blocks x 2 projections x (A, B)
  EXPECT_EQ(m->params()[0].name, "model.layers.0.self_attn.q_proj.lora_A.weight");
  EXPECT_EQ(m->params()[0].shape, (std::vector<int64_t>{3, 12}));
  EXPECT_EQ(m->params()[1].shape, (std::vector<int64_t>{16, 3}));  // q: 4 heads x 4
  EXPECT_EQ(m->params()[3].shape, (std::vector<int64_t>{12, 3}));  // down: out = hidden
  EXPECT_EQ(m->params()[4].layer, 2);                              // block 1 is layer 2
  EXPECT_EQ(peft_tensor_name(m->params()[0]), "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
  EXPECT_CONTAINS(error_of([&] { s.lora(flag("targets=qproj")); }), "target_modules entry 'qproj' matches no module");
  EXPECT_CONTAINS(error_of([&] { s.lora(flag("targets=/nothing/")); }), "regex 'nothing' matches no module");
  EXPECT_EQ(s.lora(flag("bias=all"))->params().size(), 8u);  // no biases in this model: as "none"
  LoraSetup qwen2;
  qwen2.config.qkv_bias = true;
  qwen2.base.resize(LlamaCpu<double>(qwen2.config, 1, 1).num_params(), 0.1);
  // bias: PEFT's names, the adapted projections' biases under base_layer; not decayed.
  auto lora_only = qwen2.lora(flag("bias=lora_only"));
  ASSERT_EQ(lora_only->params().size(), 8u + 4u);  // q and v biases of 2 blocks
  EXPECT_EQ(lora_only->params()[8].name, "model.layers.0.self_attn.q_proj.base_layer.bias");
  EXPECT_EQ(lora_only->params()[8].layer, 1);
  EXPECT_FALSE(lora_only->params()[8].decay);
  auto all = qwen2.lora(flag("bias=all"));
  ASSERT_EQ(all->params().size(), 8u + 6u);
  EXPECT_EQ(all->params()[9].name, "model.layers.0.self_attn.k_proj.bias");  // not adapted: its own name
  // modules_to_save: whole modules, under their own names, starting from the base's values.
  auto saved = s.lora(flag("targets=q_proj,modules_to_save=lm_head,model.norm"));
  ASSERT_EQ(saved->params().size(), 4u + 2u);
  EXPECT_EQ(saved->params()[4].name, "model.norm.weight");
  EXPECT_EQ(saved->params()[5].name, "lm_head.weight");
  EXPECT_EQ(saved->params()[5].layer, 3);
  std::vector<float> init(saved->num_params());
  saved->init_params(init.data(), 1);
  const auto base_specs = llama_param_specs(s.config);
  EXPECT_EQ(init[saved->params()[5].offset + 7], static_cast<float>(s.base[base_specs.back().offset + 7]));
  EXPECT_CONTAINS(error_of([&] { s.lora(flag("targets=q_proj,modules_to_save=lmhead")); }),
                  "modules_to_save entry 'lmhead' matches no module");
  EXPECT_CONTAINS(error_of([&] { s.lora(flag("targets=q_proj,modules_to_save=q_proj")); }),
                  "which target_modules also adapts");
  LoraSetup tied;
  tied.config.tie_word_embeddings = true;
  tied.base.resize(LlamaCpu<double>(tied.config, 1, 1).num_params(), 0.1);
  EXPECT_CONTAINS(error_of([&] { tied.lora(flag("modules_to_save=embed_tokens")); }), "tie_word_embeddings");
  EXPECT_EQ(s.lora(LoraConfig{})->params().size(), 8u);  // PEFT's default for llama: q_proj, v_proj
}

TEST(LoraAdapters, InitialisedAsPeftAFreshAdapterChangesNothing) {
  LoraSetup s;
  auto m = s.lora(flag("r=4,alpha=8,targets=all-linear"));
  std::vector<float> adapters(m->num_params());
  m->init_params(adapters.data(), 7);
  for (const auto& spec : m->params()) {
    const float* w = adapters.data() + spec.offset;
    const bool is_a = spec.name.ends_with("lora_A.weight");
    const double bound = 1 / std::sqrt(double(spec.shape[1]));
    double largest = 0;
    for (size_t i = 0; i < spec.numel; ++i) largest = std::max(largest, double(std::abs(w[i])));
    if (is_a) {
      EXPECT_LE(largest, bound) << spec.name;
      EXPECT_GT(largest, 0.8 * bound) << spec.name;  // uniform over the whole range
    } else {
      EXPECT_EQ(largest, 0) << spec.name;
    }
  }
  // B = 0: the logits are the base model's, bit for bit.
  LocalParams<float> lp(*m);
  std::copy(adapters.begin(), adapters.end(), lp.params());
  m->forward(s.inputs.data(), s.targets.data(), s.B, s.T, lp);
  LlamaCpu<float> base(s.config, s.B, s.T);
  LocalParams<float> bp(base);
  std::copy(s.base.begin(), s.base.end(), bp.params());
  base.forward(s.inputs.data(), s.targets.data(), s.B, s.T, bp);
  EXPECT_EQ(m->logits(), base.logits());
}

namespace {

// The float64 Llama on the base with every adapted weight merged: W + scale * B @ A. Its loss
// and logits are the adapted model's; its gradient G of a merged W gives the adapters' own:
// dA = scale * B^T @ G, dB = scale * G @ A^T.
struct MergedReference {
  LlamaCpu<double> model;
  LocalParams<double> params;
  std::map<std::string, const ParamSpec*> by_name;
  MergedReference(const LoraSetup& s, const LoraLlama& lora, const std::vector<float>& adapters)
      : model(s.config, s.B, s.T), params(model) {
    std::copy(s.base.begin(), s.base.end(), params.params());
    for (const auto& spec : model.params()) by_name[spec.name] = &spec;
    const double scale = lora.lora().scaling();
    const auto& specs = lora.params();
    for (size_t i = 0; i < specs.size(); i += 2) {
      const ParamSpec& a = specs[i];
      const ParamSpec* w = weight_of(a);
      const int r = a.shape[0], in = a.shape[1], out = specs[i + 1].shape[0];
      for (int o = 0; o < out; ++o)
        for (int c = 0; c < in; ++c) {
          double d = 0;
          for (int k = 0; k < r; ++k) d += double(adapters[specs[i + 1].offset + o * r + k]) * adapters[a.offset + k * in + c];
          params.params()[w->offset + o * in + c] += scale * d;
        }
    }
    model.forward(s.inputs.data(), s.targets.data(), s.B, s.T, params);
    model.backward(params, params, 1.0f);
  }
  const ParamSpec* weight_of(const ParamSpec& lora_a) const {
    const std::string name = lora_a.name.substr(0, lora_a.name.size() - std::string(".lora_A.weight").size()) + ".weight";
    return by_name.at(name);
  }
};

// Largest |got - want| relative to the largest |want|.
double relative_difference(const std::vector<double>& got, const std::vector<double>& want) {
  double diff = 0, size = 0;
  for (size_t i = 0; i < got.size(); ++i) diff = std::max(diff, std::abs(got[i] - want[i])), size = std::max(size, std::abs(want[i]));
  return diff / size;
}

}  // namespace

TEST(LoraLlama, EqualsTheMergedModelWithItsGradients) {
  for (const char* targets : {"targets=all-linear", "targets=q_proj,v_proj", "targets=o_proj,down_proj"}) {
    LoraSetup s;
    auto m = s.lora(flag(std::string("r=3,alpha=5,") + targets));
    LocalParams<float> lp(*m);
    const auto random = random_vector(lp.size(), 21, 0.3);
    std::copy(random.begin(), random.end(), lp.params());
    const std::vector<float> adapters(lp.params(), lp.params() + lp.size());
    const float loss = m->forward(s.inputs.data(), s.targets.data(), s.B, s.T, lp);
    lp.zero_grads();
    m->backward(lp, lp, 1.0f);
    MergedReference ref(s, *m, adapters);
    EXPECT_NEAR(loss, ref.model.mean_loss(), 1e-5) << targets;
    const auto logits = m->logits();
    const auto want_logits = ref.model.logits();
    EXPECT_LT(relative_difference({logits.begin(), logits.end()}, {want_logits.begin(), want_logits.end()}), 1e-5);
    const double scale = m->lora().scaling();
    const auto& specs = m->params();
    std::vector<double> got, want;
    for (size_t i = 0; i < specs.size(); i += 2) {
      const ParamSpec &a = specs[i], &b = specs[i + 1];
      const ParamSpec* w = ref.weight_of(a);
      const int r = a.shape[0], in = a.shape[1], out = b.shape[0];
      const double* G = ref.params.grads() + w->offset;
      for (int k = 0; k < r; ++k)
        for (int c = 0; c < in; ++c) {
          double d = 0;
          for (int o = 0; o < out; ++o) d += adapters[b.offset + o * r + k] * G[o * in + c];
          got.push_back(lp.grads()[a.offset + k * in + c]), want.push_back(scale * d);
        }
      for (int o = 0; o < out; ++o)
        for (int k = 0; k < r; ++k) {
          double d = 0;
          for (int c = 0; c < in; ++c) d += G[o * in + c] * adapters[a.offset + k * in + c];
          got.push_back(lp.grads()[b.offset + o * r + k]), want.push_back(scale * d);
        }
    }
    EXPECT_LT(relative_difference(got, want), 1e-4) << targets;
  }
}

TEST(LoraLlama, DropoutMaskRepeatsOnRecomputeAndIsOffWithoutTargets) {
  LoraSetup s;
  const LoraConfig with_dropout = flag("r=3,alpha=5,dropout=0.3,targets=all-linear");
  auto plain = s.lora(with_dropout), checkpointed = s.lora(with_dropout, true), none = s.lora(flag("r=3,alpha=5,targets=all-linear"));
  LocalParams<float> p1(*plain), p2(*checkpointed), p3(*none);
  const auto random = random_vector(p1.size(), 21, 0.3);
  for (auto* p : {&p1, &p2, &p3}) std::copy(random.begin(), random.end(), p->params()), p->zero_grads();
  const float l1 = plain->forward(s.inputs.data(), s.targets.data(), s.B, s.T, p1);
  const float l2 = checkpointed->forward(s.inputs.data(), s.targets.data(), s.B, s.T, p2);
  const float l3 = none->forward(s.inputs.data(), s.targets.data(), s.B, s.T, p3);
  EXPECT_EQ(l1, l2);
  EXPECT_GT(std::abs(l1 - l3), 1e-4);  // the mask changed something
  plain->backward(p1, p1, 1.0f);
  checkpointed->backward(p2, p2, 1.0f);
  for (size_t i = 0; i < p1.size(); ++i) ASSERT_EQ(p1.grads()[i], p2.grads()[i]) << i;
  // A second forward draws a new mask; evaluation (no targets) draws none.
  EXPECT_NE(plain->forward(s.inputs.data(), s.targets.data(), s.B, s.T, p1), l1);
  plain->forward(s.inputs.data(), nullptr, s.B, s.T, p1);
  none->forward(s.inputs.data(), nullptr, s.B, s.T, p3);
  EXPECT_EQ(plain->logits(), none->logits());
}

TEST(PeftAdapter, WritesWhatItReadsAndReadsPeftsFile) {
  LoraSetup s;
  auto m = s.lora(read_peft_adapter_config(kFixture + "/adapter_config.json"));
  std::vector<float> fixture(m->num_params(), -1.0f);
  // The fixture belongs to the 32-wide test Llama, not this micro one: its shapes are refused.
  EXPECT_CONTAINS(error_of([&] { read_peft_adapter_weights(kFixture, m->params(), fixture.data()); }), "has shape [4, 32]");
  TempDir dir;
  std::vector<float> adapters(m->num_params());
  m->init_params(adapters.data(), 3);
  for (size_t i = 0; i < adapters.size(); ++i) adapters[i] += 0.001f * static_cast<float>(i % 13);
  write_peft_adapter(dir.path(), m->lora(), "base", m->params(), adapters.data());
  std::vector<float> back(adapters.size());
  read_peft_adapter_weights(dir.path(), m->params(), back.data());
  EXPECT_EQ(back, adapters);
  const LoraConfig again = read_peft_adapter_config(dir.file("adapter_config.json"));
  EXPECT_EQ(again.r, 4);
  EXPECT_EQ(again.target_names.size(), 7u);
  auto fewer = s.lora(flag("r=4,targets=q_proj"));
  EXPECT_CONTAINS(error_of([&] { read_peft_adapter_weights(dir.path(), fewer->params(), back.data()); }),
                  "is not a tensor this adapter config trains");
}

TEST(LoraMerge, TheMergedBaseComputesWhatBasePlusAdaptersDid) {
  LoraSetup s;
  auto m = s.lora(flag("r=3,alpha=5,targets=all-linear"));
  LocalParams<float> lp(*m);
  const auto random = random_vector(lp.size(), 21, 0.3);
  std::copy(random.begin(), random.end(), lp.params());
  m->forward(s.inputs.data(), nullptr, s.B, s.T, lp);
  LlamaCpu<float> merged(s.config, s.B, s.T);
  LocalParams<float> mp(merged);
  std::copy(s.base.begin(), s.base.end(), mp.params());
  merge_lora_adapters(merged.params(), mp.params(), m->params(), lp.params(), m->lora().scaling());
  merged.forward(s.inputs.data(), nullptr, s.B, s.T, mp);
  const auto a = m->logits(), b = merged.logits();
  EXPECT_LT(relative_difference({a.begin(), a.end()}, {b.begin(), b.end()}), 1e-5);
  LlamaCpu<float> base(s.config, s.B, s.T);  // the adapters do change the logits
  LocalParams<float> bp(base);
  std::copy(s.base.begin(), s.base.end(), bp.params());
  base.forward(s.inputs.data(), nullptr, s.B, s.T, bp);
  const auto c = base.logits();
  EXPECT_GT(relative_difference({c.begin(), c.end()}, {b.begin(), b.end()}), 1e-2);
  auto wrong = s.lora(flag("r=3,targets=q_proj"));
  std::vector<ParamSpec> renamed = wrong->params();
  renamed[0].name = "model.layers.0.self_attn.x_proj.lora_A.weight";
  EXPECT_CONTAINS(error_of([&] { merge_lora_adapters(merged.params(), mp.params(), renamed, lp.params(), 1.0); }),
                  "does not fit a weight of the base model");
}

TEST(LoraAdapters, Gpt2ConvProjectionsByPeftsPathsWithFanInFanOut) {
  const GPT2Config gpt2 = gpt2_config(8, 37, 2, 4, 16);
  const LoraAdapters proj(gpt2, flag("r=2,targets=c_proj"), 1, 4);  // attn.c_proj and mlp.c_proj
  ASSERT_EQ(proj.specs().size(), 8u);
  EXPECT_EQ(proj.specs()[0].name, "transformer.h.0.attn.c_proj.lora_A.weight");
  EXPECT_EQ(proj.specs()[2].name, "transformer.h.0.mlp.c_proj.lora_A.weight");
  EXPECT_EQ(proj.specs()[2].shape, (std::vector<int64_t>{2, 64}));  // in = 4 x channels
  EXPECT_EQ(proj.specs()[1].shape, (std::vector<int64_t>{16, 2}));
  EXPECT_TRUE(proj.config().fan_in_fan_out);  // as PEFT sets it for Conv1D
  EXPECT_NE(peft_adapter_config_json(proj.config(), "").find("\"fan_in_fan_out\": true"), std::string::npos);
  EXPECT_EQ(LoraAdapters(gpt2, LoraConfig{}, 1, 4).specs().size(), 4u);  // PEFT's default: c_attn
  EXPECT_EQ(LoraAdapters(gpt2, flag("targets=all-linear"), 1, 4).specs().size(), 16u);
  EXPECT_CONTAINS(error_of([&] { LoraAdapters(gpt2, flag("targets=q_proj"), 1, 4); }), "GPT-2's are c_attn");
  EXPECT_CONTAINS(error_of([&] { LoraAdapters(gpt2, flag("bias=all"), 1, 4); }), "bias \"all\"");
  EXPECT_CONTAINS(error_of([&] { LoraAdapters(gpt2, flag("modules_to_save=wte"), 1, 4); }), "modules_to_save");
  // fan_in_fan_out is read, and refused where the weights are (out, in): the Llama family.
  const LoraConfig fifo = parse_peft_adapter_config(R"({"fan_in_fan_out": true})", "c.json");
  EXPECT_CONTAINS(error_of([&] { LoraAdapters(micro_config(), fifo, 1, 4); }), "c.json: key 'fan_in_fan_out'");
}

// ds_config bf16 on CPU ranks: the factory gives a LoRA model the base's bf16 GEMMs, as a full run
// has them. With a fresh adapter (B = 0) its logits are the bf16 base model's, bit for bit, and
// not the fp32 one's.
TEST(LoraLlama, Bf16RunsMultiplyTheFrozenBaseInBf16AsAFullRunDoes) {
  LoraSetup s;
  dsx::models::ModelBuildOptions options;
  options.max_batch = s.B, options.max_seq = s.T, options.cpu_bf16_gemms = true;
  ModelShape shape;
  shape.family = ModelShape::Family::Llama, shape.llama = s.config;
  auto m = make_lora_model(shape, std::vector<float>(s.base.begin(), s.base.end()),
                           flag("r=4,alpha=8,targets=all-linear"), options);
  LocalParams<float> lp(*m);
  m->init_params(lp.params(), 7);
  m->forward(s.inputs.data(), s.targets.data(), s.B, s.T, lp);
  auto base_logits = [&](bool bf16) {
    LlamaCpu<float> base(s.config, s.B, s.T);
    base.set_bf16_gemms(bf16);
    LocalParams<float> bp(base);
    std::copy(s.base.begin(), s.base.end(), bp.params());
    base.forward(s.inputs.data(), s.targets.data(), s.B, s.T, bp);
    return base.logits();
  };
  EXPECT_EQ(m->logits(), base_logits(true));
  EXPECT_NE(m->logits(), base_logits(false));
}
