// `dsx estimate` for LoRA, QLoRA and ZeRO-Infinity's NVMe offload: adapter counts against PEFT's
// arithmetic, the NF4 base against the bytes the real NF4 kernels allocate, NVMe rows against the
// DeepSpeed figures for CPU offload, and the common answers for a 7B model.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/nf4_tensor.h"
#include "models/io/nf4_base_weights.h"
#include "tools/estimate/hf_config.h"
#include "tools/estimate/adapter_memory.h"
#include "tools/estimate/memory_model.h"
#include "tools/estimate/model_presets.h"

namespace est = dsx::estimate;

namespace {

est::EstimateRequest request_for(const char* preset, int64_t gpu_gib, int64_t gpus_per_node) {
  est::EstimateRequest r;
  r.model = est::find_model_preset(preset);
  r.activations.seq_len = 2048;
  r.activations.checkpointing = true;
  r.cluster = {gpus_per_node, 1};
  r.gpu_memory_bytes = gpu_gib << 30;
  return r;
}

// Llama-2-7B (hidden 4096, MLP 11008, 32 layers): r x (in + out) summed over the targets.
TEST(EstimateLora, AdapterCountsArePeftsArithmetic) {
  auto shape = est::find_model_preset("llama2-7b");
  EXPECT_EQ(est::lora_params(shape, {}), 32 * 8 * 2 * (4096 + 4096));  // PEFT's default: q, v
  est::AdapterOptions all{64, {"all-linear"}, true};
  // q, k, v, o: 4 x (4096 + 4096); gate, up, down: 3 x (4096 + 11008); the QLoRA recipe.
  EXPECT_EQ(est::lora_params(shape, all), 159907840);
  EXPECT_EQ(est::lora_params(shape, {16, {"q_proj", "k_proj", "v_proj", "o_proj"}, true}),
            32 * 16 * 4 * 8192);
  auto gpt2 = est::find_model_preset("gpt2");
  EXPECT_EQ(est::lora_params(gpt2, {}), 12 * 8 * (768 + 3 * 768));  // c_attn
}

TEST(EstimateLora, AnUnknownTargetNamesTheModulesThereAre) {
  auto shape = est::find_model_preset("llama2-7b");
  try {
    est::lora_params(shape, {8, {"c_attn"}, true});
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("q_proj, k_proj, v_proj"), std::string::npos) << e.what();
  }
}

// The estimate's NF4 bytes are what the NF4 kernels hold (plus the 16-value code a saved folder
// carries as weight.quant_map), for odd shapes, partial blocks and both absmax forms.
TEST(EstimateQlora, Nf4BytesAreWhatTheKernelsAllocate) {
  for (auto [out, in] :
       std::vector<std::pair<int64_t, int64_t>>{{64, 64}, {300, 77}, {129, 1000}}) {
    std::vector<float> w(static_cast<size_t>(out * in), 0.25f);
    for (bool dq : {false, true}) {
      auto t = dsx::kernels::nf4_quantize_matrix(w.data(), dsx::kernels::DType::F32, out, in,
                                                 {.blocksize = 64, .double_quant = dq});
      EXPECT_EQ(est::nf4_weight_bytes(out, in, dq), static_cast<int64_t>(t.storage_bytes()) + 64)
          << out << "x" << in << " dq " << dq;
    }
  }
}

// The estimate of a QLoRA base is what dsx holds after loading it: the tiny Llama that
// transformers saved with bitsandbytes 4-bit, its NF4 linears (plus the 16-value code each
// carries) and its other tensors in 16-bit.
TEST(EstimateQlora, BaseBytesAreWhatTheLoaderHolds) {
  const std::string dir = std::string(DSX_SOURCE_DIR) + "/tests/models/data/llama_bnb_nf4";
  auto shape = est::read_hf_config(dir + "/config.json");
  auto base = dsx::models::read_nf4_base_weights(dir);
  int64_t held = 0;
  for (const auto& [name, w] : base.linears) held += static_cast<int64_t>(w.storage_bytes()) + 64;
  for (const auto& [name, d] : base.dense) held += 2 * static_cast<int64_t>(d.values.size());
  EXPECT_EQ(est::frozen_base_bytes(shape, est::Method::Qlora, true, 2), held);
}

// Llama-2-7B in NF4 with double quantisation: 4.127 bits a linear weight plus the 16-bit
// embeddings and lm_head, 3.87 GB (the fact sheet's figure); without it 4.17 GB.
TEST(EstimateQlora, SevenBBaseIsAboutFourGigabytes) {
  auto shape = est::find_model_preset("llama2-7b");
  EXPECT_NEAR(est::frozen_base_bytes(shape, est::Method::Qlora, true, 2) / 1e9, 3.87, 0.01);
  EXPECT_NEAR(est::frozen_base_bytes(shape, est::Method::Qlora, false, 2) / 1e9, 4.17, 0.01);
  EXPECT_EQ(est::frozen_base_bytes(shape, est::Method::Lora, true, 2),
            2 * est::parameter_count(shape));
}

// The common answers: full bf16 fine-tuning of a 7B model needs 2 x A100 80GB or 4 x A100 40GB;
// QLoRA fits one 24 GB card, and so does LoRA on a 16-bit base.
TEST(EstimateFit, SevenBGivesTheCommonAnswers) {
  for (auto [gib, gpus] : std::vector<std::pair<int64_t, int64_t>>{{80, 2}, {40, 4}}) {
    auto r = request_for("llama2-7b", gib, 8);
    auto fewest = est::fewest_gpus(r, {3, est::Offload::None});
    ASSERT_TRUE(fewest);
    EXPECT_EQ(fewest->total_gpus(), gpus) << gib << " GiB";
  }
  auto r = request_for("llama2-7b", 24, 1);
  r.adapter = {64, {"all-linear"}, true};
  auto qlora = est::estimate_memory(r, {0, est::Offload::None, est::Method::Qlora});
  EXPECT_TRUE(qlora.fits());
  EXPECT_EQ(qlora.trainable_params, 159907840);
  EXPECT_LT(qlora.gpu_model_states, int64_t{8} << 30);
  auto full = est::estimate_memory(r, {0, est::Offload::None});
  EXPECT_FALSE(full.fits());
  // 70B: QLoRA's base is ~36 GB, so one 80 GB card, where LoRA's 16-bit base needs stage 3.
  auto big = request_for("llama2-70b", 80, 8);
  EXPECT_EQ(est::fewest_gpus(big, {0, est::Offload::None, est::Method::Qlora})->total_gpus(), 1);
  EXPECT_GT(est::fewest_gpus(big, {3, est::Offload::None, est::Method::Lora})->total_gpus(), 1);
}

// ZeRO-Infinity keeps DeepSpeed's GPU figure for the same offload to the CPU, moves the optimizer
// side (16 B a parameter) and, with params, the 16-bit weights to NVMe, and leaves the host the
// pinned swap buffers: buffer_count x min(sub_group_size, partition) fp32 elements per rank.
TEST(EstimateNvme, StatesMoveToDiskAndTheHostKeepsSwapBuffers) {
  auto r = request_for("llama2-7b", 80, 8);
  const int64_t P = est::parameter_count(r.model);
  auto cpu = est::estimate_memory(r, {3, est::Offload::Optimizer});
  auto nvme = est::estimate_memory(r, {3, est::Offload::OptimizerNvme});
  EXPECT_EQ(nvme.gpu_model_states, cpu.gpu_model_states);
  EXPECT_EQ(nvme.nvme_per_node, 16 * P);
  const int64_t partition = (P + 7) / 8;
  EXPECT_EQ(nvme.cpu_model_states, 8 * 4 * std::min<int64_t>(1000000000, partition) * 4);
  auto cpu_params = est::estimate_memory(r, {3, est::Offload::OptimizerAndParams});
  auto nvme_params = est::estimate_memory(r, {3, est::Offload::OptimizerAndParamsNvme});
  EXPECT_EQ(nvme_params.gpu_model_states, cpu_params.gpu_model_states);
  EXPECT_EQ(nvme_params.nvme_per_node, 18 * P);
  EXPECT_EQ(nvme_params.cpu_model_states - nvme.cpu_model_states, 8 * 5 * 100000000LL * 2);
  r.sub_group_size = 100000000;  // a smaller sub-group shrinks the pinned pool
  EXPECT_EQ(est::estimate_memory(r, {3, est::Offload::OptimizerNvme}).cpu_model_states,
            8 * 4 * 100000000LL * 4);
}

TEST(EstimateNvme, OnlyStageThreeAndAdaptersUnoffloaded) {
  auto options = est::zero_options({0, 1, 2, 3}, {est::Offload::None, est::Offload::OptimizerNvme},
                                   {est::Method::Full, est::Method::Lora, est::Method::Qlora});
  int nvme = 0, lora = 0, qlora = 0;
  for (auto o : options) {
    if (est::offloads_to_nvme(o.offload)) {
      EXPECT_EQ(o.stage, 3);
      ++nvme;
    }
    if (o.method != est::Method::Full) {
      EXPECT_EQ(o.offload, est::Offload::None);
    }
    lora += o.method == est::Method::Lora;
    qlora += o.method == est::Method::Qlora;
  }
  EXPECT_EQ(nvme, 1);
  EXPECT_EQ(lora, 2);  // stage 0 and stage 3
  EXPECT_EQ(qlora, 2);
}

}  // namespace
