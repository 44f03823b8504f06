// GPT-2 weights on disk: llm.c checkpoints (fp32 v3, bf16 v5) and Hugging Face safetensors
// round-trip bit-exactly; damaged files get a Format error naming the file and the problem.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "dsx/error.h"
#include "models/gpt2/gpt2_cpu.h"
#include "models/io/gpt2_weights.h"
#include "models/io/safetensors.h"
#include "models/model_source.h"
#include "tests/models/temp_dir.h"

using namespace dsx::models;
using dsx::kernels::DType;

namespace {

GPT2Config small_config() {
  // vocabulary padded to 384: real padding
  return gpt2_config(/*max_seq_len=*/16, /*vocab_size=*/300, /*num_layers=*/2, /*num_heads=*/4, /*channels=*/16);
}

std::vector<float> random_params(const GPT2Config& c) {
  GPT2Cpu<float> model(c, 1, 1);
  std::vector<float> p(model.num_params());
  model.init_params(p.data(), 5);
  for (size_t i = 0; i < p.size(); ++i) p[i] += 1e-3f * static_cast<float>(i % 7);  // biases, norms non-trivial
  // ... but the padded vocabulary rows stay zero, as in every real checkpoint.
  std::fill(p.begin() + static_cast<long>(c.vocab_size) * c.channels,
            p.begin() + static_cast<long>(c.padded_vocab_size) * c.channels, 0.0f);
  return p;
}

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

bool same_config(const GPT2Config& a, const GPT2Config& b) {
  return a.max_seq_len == b.max_seq_len && a.vocab_size == b.vocab_size &&
         a.padded_vocab_size == b.padded_vocab_size && a.num_layers == b.num_layers &&
         a.num_heads == b.num_heads && a.channels == b.channels;
}

template <class F>
std::string format_error(F&& f) {
  try {
    f();
  } catch (const dsx::Error& e) {
    EXPECT_EQ(e.kind(), dsx::ErrorKind::Format) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

// Read-back bf16 weights: each parameter rounded to bf16 (nearest even) and widened again.
void expect_bf16_of(const std::vector<float>& read, const std::vector<float>& written) {
  ASSERT_EQ(read.size(), written.size());
  for (size_t i = 0; i < written.size(); ++i)
    ASSERT_EQ(read[i], dsx::kernels::bf16_to_float(dsx::kernels::float_to_bf16(written[i]))) << i;
}

// Each test writes the same small model's random weights into its own scratch directory.
class Gpt2Weights : public ::testing::Test {
 protected:
  dsx::test::TempDir dir;
  GPT2Config c = small_config();
  std::vector<float> p = random_params(c);
};

}  // namespace

TEST_F(Gpt2Weights, LlmcFp32RoundTripIsBitExact) {
  write_llmc_checkpoint(dir.file("a.bin"), c, p.data());
  auto w = read_llmc_checkpoint(dir.file("a.bin"));
  EXPECT_TRUE(same_config(w.config, c));
  ASSERT_EQ(w.params.size(), p.size());
  EXPECT_EQ(std::memcmp(w.params.data(), p.data(), p.size() * 4), 0);
  write_llmc_checkpoint(dir.file("b.bin"), w.config, w.params.data());
  EXPECT_EQ(bytes_of(dir.file("a.bin")), bytes_of(dir.file("b.bin")));
  // The header is llm.c's: magic, version 3, maxT, V, L, NH, C, Vp.
  std::string raw = bytes_of(dir.file("a.bin"));
  int32_t h[8];
  std::memcpy(h, raw.data(), sizeof(h));
  EXPECT_EQ(h[0], 20240326);
  EXPECT_EQ(h[1], 3);
  EXPECT_EQ(h[7], 384);
  EXPECT_EQ(raw.size(), 1024 + p.size() * 4);
}

TEST_F(Gpt2Weights, LlmcBf16RoundTripIsBitExact) {
  write_llmc_checkpoint(dir.file("a.bin"), c, p.data(), DType::BF16);
  auto w = read_llmc_checkpoint(dir.file("a.bin"));
  expect_bf16_of(w.params, p);
  write_llmc_checkpoint(dir.file("b.bin"), w.config, w.params.data(), DType::BF16);
  EXPECT_EQ(bytes_of(dir.file("a.bin")), bytes_of(dir.file("b.bin")));
  EXPECT_EQ(bytes_of(dir.file("a.bin")).size(), 1024 + p.size() * 2);
}

TEST_F(Gpt2Weights, LlmcDamagedFilesAreRejected) {
  write_llmc_checkpoint(dir.file("a.bin"), c, p.data());
  std::string raw = bytes_of(dir.file("a.bin"));
  write_bytes(dir.file("cut.bin"), raw.substr(0, raw.size() - 4));
  EXPECT_NE(format_error([&] { read_llmc_checkpoint(dir.file("cut.bin")); }).find("truncated"), std::string::npos);
  std::string v = raw;
  v[4] = 4;  // version 4 does not exist
  write_bytes(dir.file("v4.bin"), v);
  EXPECT_NE(format_error([&] { read_llmc_checkpoint(dir.file("v4.bin")); }).find("version 4"), std::string::npos);
  std::string m = raw;
  m[0] ^= 1;
  write_bytes(dir.file("magic.bin"), m);
  EXPECT_NE(format_error([&] { read_llmc_checkpoint(dir.file("magic.bin")); }).find("magic"), std::string::npos);
  write_bytes(dir.file("tiny.bin"), "abc");
  format_error([&] { read_llmc_checkpoint(dir.file("tiny.bin")); });
  EXPECT_THROW(read_llmc_checkpoint(dir.file("missing.bin")), dsx::Error);
}

TEST_F(Gpt2Weights, SafetensorsRoundTripIsBitExactInHuggingFaceLayout) {
  write_gpt2_safetensors(dir.file("model.safetensors"), c, p.data());
  auto w = read_gpt2_safetensors(dir.file("model.safetensors"));
  EXPECT_TRUE(same_config(w.config, c));
  EXPECT_EQ(std::memcmp(w.params.data(), p.data(), p.size() * 4), 0);
  write_gpt2_safetensors(dir.file("again.safetensors"), w.config, w.params.data());
  EXPECT_EQ(bytes_of(dir.file("model.safetensors")), bytes_of(dir.file("again.safetensors")));

  // Hugging Face layout: wte unpadded, Conv1D weights (in, out).
  SafetensorsReader st(dir.file("model.safetensors"));
  EXPECT_EQ(st.metadata().at("format"), "pt");
  EXPECT_EQ(st.find("wte.weight")->shape, (std::vector<int64_t>{300, 16}));
  const TensorView* qkv = st.find("h.1.attn.c_attn.weight");
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->shape, (std::vector<int64_t>{16, 48}));
  auto specs = gpt2_param_specs(c);
  const float* ours = p.data() + specs[gpt2_param_index(c, kQkvw, 1)].offset;  // (48, 16)
  float stored;
  std::memcpy(&stored, qkv->data + (3 * 48 + 40) * 4, 4);  // [in=3][out=40]
  EXPECT_EQ(stored, ours[40 * 16 + 3]);
  EXPECT_EQ(st.find("lm_head.weight"), nullptr);  // tied
}

TEST_F(Gpt2Weights, SafetensorsBf16AndHeadCountFromConfigJson) {
  write_gpt2_safetensors(dir.file("bf16.safetensors"), c, p.data(), DType::BF16);
  auto w = read_gpt2_safetensors(dir.file("bf16.safetensors"));
  expect_bf16_of(w.params, p);

  // A file as transformers writes it: "transformer." prefix, no n_head metadata, lm_head present.
  SafetensorsReader src(dir.file("bf16.safetensors"));
  SafetensorsWriter hf;
  for (const auto& [name, t] : src.tensors()) hf.add("transformer." + name, t.dtype, t.shape, t.data, t.bytes);
  const TensorView* wte = src.find("wte.weight");
  hf.add("lm_head.weight", wte->dtype, wte->shape, wte->data, wte->bytes);
  hf.set_metadata("format", "pt");
  hf.write(dir.file("model.safetensors"));
  EXPECT_NE(format_error([&] { read_gpt2_safetensors(dir.file("model.safetensors")); }).find("heads"), std::string::npos);
  EXPECT_EQ(read_gpt2_safetensors(dir.file("model.safetensors"), 4).config.num_heads, 4);
  write_gpt2_hf_config(dir.file("config.json"), c);
  auto from_dir = read_gpt2_safetensors(dir.file("model.safetensors"));
  EXPECT_TRUE(same_config(from_dir.config, c));
  EXPECT_EQ(from_dir.params, w.params);
}

TEST_F(Gpt2Weights, SafetensorsDamagedFilesAreRejected) {
  write_gpt2_safetensors(dir.file("m.safetensors"), c, p.data());
  std::string raw = bytes_of(dir.file("m.safetensors"));
  write_bytes(dir.file("cut.safetensors"), raw.substr(0, raw.size() - 10));
  EXPECT_NE(format_error([&] { SafetensorsReader r(dir.file("cut.safetensors")); }).find("outside"), std::string::npos);
  std::string huge = raw;
  uint64_t len = 1ull << 40;
  std::memcpy(huge.data(), &len, 8);
  write_bytes(dir.file("huge.safetensors"), huge);
  format_error([&] { SafetensorsReader r(dir.file("huge.safetensors")); });
  std::string json = raw;
  json[8] = '[';  // the header must be an object
  write_bytes(dir.file("json.safetensors"), json);
  format_error([&] { SafetensorsReader r(dir.file("json.safetensors")); });
  // issue 33, item 22: an F32 tensor relabelled F8_E4M3 is an unsupported dtype, not a byte count.
  const std::string header = R"({"w":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,8]}})";
  std::string f8(8, '\0');
  const uint64_t header_len = header.size();
  std::memcpy(f8.data(), &header_len, 8);
  write_bytes(dir.file("f8.safetensors"), f8 + header + std::string(8, '\0'));
  const std::string msg = format_error([&] { SafetensorsReader r(dir.file("f8.safetensors")); });
  EXPECT_NE(msg.find("dtype F8_E4M3, which dsx does not support"), std::string::npos) << msg;
}

// issue 33 item 20: a tensor the model does not read used to be ignored (docs/models.md: refused).
TEST_F(Gpt2Weights, SafetensorsExtraTensorIsRefused) {
  write_gpt2_safetensors(dir.file("m.safetensors"), c, p.data());
  SafetensorsReader src(dir.file("m.safetensors"));
  auto copy_with = [&](const std::string& extra, const std::string& out) {
    SafetensorsWriter w;
    for (const auto& [name, t] : src.tensors()) w.add(name, t.dtype, t.shape, t.data, t.bytes);
    float x = 1.0f;
    w.add(extra, "F32", {1}, &x, 4);
    w.set_metadata("n_head", "4");
    w.write(dir.file(out));
  };
  copy_with("h.2.ln_1.bias", "extra.safetensors");  // a third layer's stray tensor
  EXPECT_NE(format_error([&] { read_gpt2_safetensors(dir.file("extra.safetensors")); })
                .find("tensor 'h.2.ln_1.bias' is not part of a GPT-2 model of 2 layers"),
            std::string::npos);
  copy_with("lm_head.weight", "head.safetensors");  // an untied head
  EXPECT_NE(format_error([&] { read_gpt2_safetensors(dir.file("head.safetensors")); }).find("lm_head.weight differs"),
            std::string::npos);
  copy_with("h.1.attn.masked_bias", "mask.safetensors");  // old transformers' buffer, skipped as transformers does
  EXPECT_EQ(read_gpt2_safetensors(dir.file("mask.safetensors")).params, p);
}

// issue 33 item 20: overlapping data_offsets were accepted; both tensors are named.
TEST_F(Gpt2Weights, SafetensorsOverlappingOffsetsAreRefused) {
  std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  uint64_t len = header.size();
  std::string raw(reinterpret_cast<const char*>(&len), 8);
  raw += header + std::string(12, '\0');
  write_bytes(dir.file("overlap.safetensors"), raw);
  std::string err = format_error([&] { SafetensorsReader r(dir.file("overlap.safetensors")); });
  EXPECT_NE(err.find("tensors 'a' data_offsets [0, 8] and 'b' data_offsets [4, 12] overlap"), std::string::npos) << err;
}

// issue 33 item 20: config.json's n_head was overridden by the file's metadata without a word.
TEST_F(Gpt2Weights, SafetensorsHeadCountDisagreementIsRefused) {
  write_gpt2_safetensors(dir.file("model.safetensors"), c, p.data());  // metadata n_head 4
  GPT2Config other = c;
  other.num_heads = 2;
  write_gpt2_hf_config(dir.file("config.json"), other);
  EXPECT_NE(format_error([&] { read_gpt2_safetensors(dir.file("model.safetensors")); })
                .find("its metadata says n_head 4 but config.json beside it says 2"),
            std::string::npos);
  write_gpt2_hf_config(dir.file("config.json"), c);
  EXPECT_EQ(read_gpt2_safetensors(dir.file("model.safetensors")).config.num_heads, 4);
}

// issue 33 item 20: a sharded GPT-2 folder was asked for the index file it has.
TEST_F(Gpt2Weights, ShardedGpt2FolderIsRefusedForWhatItIs) {
  write_gpt2_hf_config(dir.file("config.json"), c);
  write_gpt2_safetensors(dir.file("model-00001-of-00001.safetensors"), c, p.data());
  write_bytes(dir.file("model.safetensors.index.json"), R"({"metadata": {}, "weight_map": {}})");
  try {
    load_model_source(dir.path());
    ADD_FAILURE() << "no error";
  } catch (const dsx::Error& e) {
    std::string err = e.what();
    EXPECT_EQ(err.find("needs config.json and model.safetensors (or a sharded"), std::string::npos) << err;
    EXPECT_NE(err.find("this GPT-2 folder has sharded weights (model.safetensors.index.json)"), std::string::npos) << err;
  }
}

TEST_F(Gpt2Weights, LoadTellsTheFormatsApart) {
  write_llmc_checkpoint(dir.file("m.bin"), c, p.data());
  write_gpt2_safetensors(dir.file("m.safetensors"), c, p.data());
  EXPECT_EQ(load_gpt2_weights(dir.file("m.bin")).params, p);
  EXPECT_EQ(load_gpt2_weights(dir.file("m.safetensors")).params, p);
}
