// QLoRA's base from a Hugging Face folder: data/llama_bnb_nf4 is data/llama_bf16 as transformers
// saves it with bitsandbytes 4-bit quantisation (compat/make_bnb_nf4_fixture.py), and
// llama_bnb_nf4_dequant.safetensors holds bnb's dequantize_4bit of each of its weights.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "dsx/error.h"
#include "kernels/nf4_tensor.h"
#include "models/io/nf4_base_weights.h"
#include "models/io/safetensors.h"
#include "tests/expect_contains.h"
#include "tests/models/temp_dir.h"

namespace dsx::models {
namespace {

using test::TempDir;

const std::string kData = std::string(DSX_SOURCE_DIR) + "/tests/models/data/";

// The message of the dsx::Error that reading `dir` throws, checked to be of `kind`.
std::string read_error(const std::string& dir, ErrorKind kind) {
  try {
    read_nf4_base_weights(dir);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error reading " << dir;
  return "";
}

std::vector<uint8_t> dequantised_bytes(const kernels::Nf4Tensor& w) {
  std::vector<uint8_t> out(static_cast<size_t>(w.numel()) * kernels::dtype_size(w.compute));
  kernels::nf4_dequantize_matrix(out.data(), w.compute, w);
  return out;
}

TEST(Nf4BaseWeights, BitsandbytesFolderDequantisesAsBitsandbytesDoes) {
  ASSERT_TRUE(hf_folder_is_bnb_4bit(kData + "llama_bnb_nf4"));
  EXPECT_FALSE(hf_folder_is_bnb_4bit(kData + "llama_bf16"));
  Nf4BaseWeights base = read_nf4_base_weights(kData + "llama_bnb_nf4");
  EXPECT_TRUE(base.prequantized);
  ASSERT_EQ(base.linears.size(), 14u);  // 2 layers x q, k, v, o, gate, up, down
  SafetensorsReader expected(kData + "llama_bnb_nf4_dequant.safetensors");
  ASSERT_EQ(expected.tensors().size(), 14u);
  for (const auto& [name, view] : expected.tensors()) {
    auto it = base.linears.find(name);
    ASSERT_NE(it, base.linears.end()) << name;
    const kernels::Nf4Tensor& w = it->second;
    EXPECT_EQ(std::vector<int64_t>({w.rows, w.cols}), view.shape) << name;
    EXPECT_TRUE(w.nested) << name;
    EXPECT_EQ(w.compute, kernels::DType::BF16) << name;
    std::vector<uint8_t> want(view.data, view.data + view.bytes);
    EXPECT_EQ(dequantised_bytes(w), want) << name;
  }
  // Embeddings, norms and lm_head stay dense; no quant-state part leaks in as a tensor.
  EXPECT_EQ(base.dense.size(), 2u + 2 * 2 + 1);
  EXPECT_TRUE(base.dense.count("lm_head.weight"));
  EXPECT_TRUE(base.dense.count("model.embed_tokens.weight"));
}

// Quantising the bf16 folder at load gives bitsandbytes' own packed codes and nested absmax.
TEST(Nf4BaseWeights, QuantisingAtLoadEqualsTheBitsandbytesFolder) {
  Nf4BaseWeights ours = read_nf4_base_weights(kData + "llama_bf16");
  Nf4BaseWeights bnb = read_nf4_base_weights(kData + "llama_bnb_nf4");
  EXPECT_FALSE(ours.prequantized);
  ASSERT_EQ(ours.linears.size(), bnb.linears.size());
  for (const auto& [name, w] : bnb.linears) {
    const kernels::Nf4Tensor& q = ours.linears.at(name);
    EXPECT_EQ(q.packed, w.packed) << name;
    ASSERT_TRUE(q.nested);
    EXPECT_EQ(q.nested->offset, w.nested->offset) << name;
    EXPECT_EQ(q.nested->absmax, w.nested->absmax) << name;
  }
  EXPECT_EQ(ours.dense.size(), bnb.dense.size());
  const DenseTensor& a = ours.dense.at("model.norm.weight");
  const DenseTensor& b = bnb.dense.at("model.norm.weight");
  EXPECT_EQ(a.values, b.values);
}

// A copy of the fixture with one tensor changed by `edit`, written through SafetensorsWriter.
std::string edited_copy(const TempDir& dir, const std::string& drop, const std::string& replace,
                        const std::string& dtype, const std::vector<uint8_t>& bytes) {
  const std::string src = kData + "llama_bnb_nf4";
  std::filesystem::copy_file(src + "/config.json", dir.file("config.json"));
  SafetensorsReader in(src + "/model.safetensors");
  SafetensorsWriter out;
  for (const auto& [name, v] : in.tensors()) {
    if (name == drop) continue;
    if (name == replace) {
      out.add(name, dtype, {static_cast<int64_t>(bytes.size())}, bytes.data(), bytes.size());
      continue;
    }
    out.add(name, v.dtype, v.shape, v.data, v.bytes);
  }
  out.write(dir.file("model.safetensors"));
  return dir.path();
}

TEST(Nf4BaseWeights, OtherQuantisationsAndGpt2AreRefusedByName) {
  TempDir dir;
  std::filesystem::copy_file(kData + "llama_bf16/model.safetensors", dir.file("model.safetensors"));
  std::ofstream(dir.file("config.json"))
      << R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"],
             "quantization_config": {"quant_method": "gptq", "bits": 4}})";
  EXPECT_CONTAINS(read_error(dir.path(), ErrorKind::Unsupported), "quantization_config is gptq");
  std::ofstream(dir.file("config.json"))
      << R"({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]})";
  EXPECT_CONTAINS(read_error(dir.path(), ErrorKind::Unsupported), "is a GPT-2 folder");
}

TEST(Nf4BaseWeights, DamagedQuantStatesNameTheTensor) {
  const std::string q = "model.layers.1.self_attn.q_proj.weight";
  {
    TempDir dir;
    edited_copy(dir, q + ".nested_absmax", "", "", {});
    EXPECT_CONTAINS(read_error(dir.path(), ErrorKind::Format), q + ".nested_absmax' is missing");
  }
  {
    TempDir dir;
    std::string json =
        R"({"quant_type": "fp4", "blocksize": 64, "dtype": "bfloat16", "shape": [32, 32]})";
    edited_copy(dir, "", q + ".quant_state.bitsandbytes__nf4", "U8",
                std::vector<uint8_t>(json.begin(), json.end()));
    EXPECT_CONTAINS(read_error(dir.path(), ErrorKind::Unsupported),
                    "dsx reads NF4 4-bit weights only");
  }
  {
    TempDir dir;
    edited_copy(dir, "", q, "U8", std::vector<uint8_t>(100, 0));
    EXPECT_CONTAINS(read_error(dir.path(), ErrorKind::Format),
                    "a 4-bit [32, 32] weight packs into 512");
  }
}

}  // namespace
}  // namespace dsx::models
