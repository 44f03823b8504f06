// NF4 against bitsandbytes' own outputs (tests/kernels/nf4/nf4_bnb.safetensors, written by
// make_nf4_fixtures.py with bnb's quantize_4bit/dequantize_4bit on the CPU): codes, absmax and
// dequantised values bit for bit; and the tiled NF4 linear layer against a float64 product.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/nf4.h"
#include "kernels/nf4_tensor.h"
#include "models/io/safetensors.h"

namespace dsx::kernels {
namespace {

const models::SafetensorsReader& fixtures() {
  static models::SafetensorsReader reader(std::string(DSX_SOURCE_DIR) +
                                          "/tests/kernels/nf4/nf4_bnb.safetensors");
  return reader;
}

const models::TensorView& fixture(const std::string& name) {
  const models::TensorView* t = fixtures().find(name);
  if (!t) throw std::runtime_error("fixture tensor missing: " + name);
  return *t;
}

template <class T>
std::vector<T> fixture_values(const std::string& name) {
  const models::TensorView& t = fixture(name);
  std::vector<T> v(t.bytes / sizeof(T));
  std::memcpy(v.data(), t.data, v.size() * sizeof(T));
  return v;
}

DType dtype_of(const models::TensorView& t) {
  return t.dtype == "F32" ? DType::F32 : t.dtype == "BF16" ? DType::BF16 : DType::F16;
}

// The bytes of a buffer of n elements of `type`, for bitwise comparison.
std::vector<uint8_t> bytes_of(const void* p, size_t n, DType type) {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  return std::vector<uint8_t>(b, b + n * dtype_size(type));
}

TEST(Nf4, CodeValuesAreBitsandbytes) {
  auto code = fixture_values<float>("nf4_code");
  ASSERT_EQ(code.size(), 16u);
  for (unsigned i = 0; i < 16; ++i) EXPECT_EQ(nf4_value(i), code[i]) << i;
}

TEST(Nf4, DynamicCode8IsBitsandbytesCreateDynamicMap) {
  auto expected = fixture_values<float>("dynamic_map");
  auto code = dynamic_code8();
  for (size_t i = 0; i < 256; ++i) EXPECT_EQ(code[i], expected[i]) << i;
}

TEST(Nf4, MidpointTiesTakeTheLowerIndex) {
  for (unsigned i = 0; i < 15; ++i) {
    float mid = (nf4_value(i) + nf4_value(i + 1)) * 0.5f;
    EXPECT_EQ(nf4_index(mid), i);
    EXPECT_EQ(nf4_index(std::nextafter(mid, 2.0f)), i + 1);
  }
}

class Nf4Bnb : public ::testing::TestWithParam<std::string> {};

TEST_P(Nf4Bnb, QuantiseEqualsBitsandbytesBitForBit) {
  const std::string c = GetParam();
  const models::TensorView& input = fixture(c + ".input");
  auto packed = fixture_values<uint8_t>(c + ".packed");
  auto absmax = fixture_values<float>(c + ".absmax");
  int64_t n = static_cast<int64_t>(input.numel());
  std::vector<uint8_t> got_packed(static_cast<size_t>(nf4_packed_bytes(n)));
  std::vector<float> got_absmax(static_cast<size_t>(nf4_blocks(n, 64)));
  nf4_quantize(got_packed.data(), got_absmax.data(), input.data, dtype_of(input), n, 64);
  EXPECT_EQ(got_packed, packed);
  ASSERT_EQ(got_absmax.size(), absmax.size());
  for (size_t b = 0; b < absmax.size(); ++b) EXPECT_EQ(got_absmax[b], absmax[b]) << "block " << b;
}

TEST_P(Nf4Bnb, DequantiseEqualsBitsandbytesBitForBit) {
  const std::string c = GetParam();
  auto packed = fixture_values<uint8_t>(c + ".packed");
  auto absmax = fixture_values<float>(c + ".absmax");
  for (const char* tag : {"f32", "bf16", "f16"}) {
    const models::TensorView& expected = fixture(c + ".dequant_" + tag);
    DType type = dtype_of(expected);
    std::vector<uint8_t> out(expected.bytes);
    nf4_dequantize(out.data(), type, packed.data(), absmax.data(),
                   static_cast<int64_t>(expected.numel()), 64);
    EXPECT_EQ(out, bytes_of(expected.data, expected.numel(), type)) << tag;
  }
}

INSTANTIATE_TEST_SUITE_P(Inputs, Nf4Bnb, ::testing::Values("f32", "bf16", "f16", "odd"));

Nf4Tensor bnb_double_quantised() {
  const models::TensorView& input = fixture("dq.input");
  Nf4Tensor t;
  t.rows = input.shape[0];
  t.cols = input.shape[1];
  t.packed = fixture_values<uint8_t>("dq.packed");
  Nf4NestedAbsmax nested;
  nested.codes = fixture_values<uint8_t>("dq.absmax");
  nested.absmax = fixture_values<float>("dq.nested_absmax");
  nested.code = fixture_values<float>("dq.nested_quant_map");
  nested.offset = fixture_values<float>("dq.nested_offset")[0];
  t.nested = nested;
  return t;
}

TEST(Nf4DoubleQuant, DequantisingBitsandbytesStateIsBitForBit) {
  Nf4Tensor t = bnb_double_quantised();
  const models::TensorView& expected = fixture("dq.dequant_bf16");
  std::vector<uint16_t> out(static_cast<size_t>(t.numel()));
  nf4_dequantize_matrix(out.data(), DType::BF16, t);
  EXPECT_EQ(bytes_of(out.data(), out.size(), DType::BF16),
            bytes_of(expected.data, expected.numel(), DType::BF16));
}

// Our double quantisation against bnb's: the 4-bit codes, the offset (the mean of the absmax)
// and the nested absmax are equal; the 8-bit codes are the nearest code values. bnb's CPU
// backend finds them through a 65536-entry table, which can take the farther neighbour when
// absmax / nested absmax lies within the table's step (2/65535) of a midpoint: only there may
// the two differ, by one index. (bnb's CUDA kernel and its earlier CPU code take the nearest.)
TEST(Nf4DoubleQuant, QuantiseMatchesBitsandbytes) {
  Nf4Tensor bnb = bnb_double_quantised();
  const models::TensorView& input = fixture("dq.input");
  Nf4Tensor ours = nf4_quantize_matrix(input.data, DType::BF16, bnb.rows, bnb.cols,
                                       {.blocksize = 64, .double_quant = true});
  ASSERT_TRUE(ours.nested);
  EXPECT_EQ(ours.packed, bnb.packed);
  EXPECT_EQ(ours.nested->offset, bnb.nested->offset);
  EXPECT_EQ(ours.nested->absmax, bnb.nested->absmax);
  Nf4Tensor plain = nf4_quantize_matrix(input.data, DType::BF16, bnb.rows, bnb.cols);
  const auto& code = ours.nested->code;
  int differing = 0;
  for (size_t b = 0; b < ours.nested->codes.size(); ++b) {
    int a = ours.nested->codes[b], e = bnb.nested->codes[b];
    if (a == e) continue;
    ++differing;
    ASSERT_EQ(std::abs(a - e), 1) << "block " << b;
    float mid = (code[std::min(a, e)] + code[std::max(a, e)]) * 0.5f;
    float scaled = (plain.absmax[b] - ours.nested->offset) / ours.nested->absmax[b / 256];
    EXPECT_LT(std::fabs(scaled - mid), 2.0f / 65535.0f) << "block " << b;
  }
  // The table is coarser than the code near 0, where centred absmax values gather: 10 of 264.
  EXPECT_LT(differing, static_cast<int>(ours.nested->codes.size()) / 10);
}

// ---- the tiled linear layer ----

struct LinearCase {
  Nf4Tensor w;
  std::vector<double> dense;  // W dequantised to the compute dtype, as float64
};

LinearCase random_linear(int64_t rows, int64_t cols, bool double_quant, DType compute) {
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (float& v : w) v = normal(gen);
  LinearCase c{
      nf4_quantize_matrix(w.data(), DType::F32, rows, cols,
                          {.blocksize = 64, .double_quant = double_quant, .compute = compute}),
      {}};
  std::vector<float> dense(w.size());
  nf4_dequantize_matrix(dense.data(), DType::F32, c.w);
  c.dense.resize(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    uint16_t h[2];
    store_from_float(compute, h, 0, dense[i]);
    c.dense[i] = compute == DType::F32 ? dense[i] : load_as_float(compute, h, 0);
  }
  return c;
}

TEST(Nf4Linear, ForwardAndInputGradientMatchFloat64OverSeveralTiles) {
  const int64_t rows = 520, cols = 2048, tokens = 3;  // 1 MiB tiles: 128 rows, 5 tiles
  for (bool dq : {false, true}) {
    for (DType compute : {DType::BF16, DType::F16, DType::F32}) {
      LinearCase c = random_linear(rows, cols, dq, compute);
      ASSERT_GT(rows, nf4_tile_rows(c.w) * 3);
      std::mt19937 gen(11);
      std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
      std::vector<float> x(tokens * cols), dy(tokens * rows), y(tokens * rows),
          dx(tokens * cols, 1.0f);
      for (float& v : x) v = uniform(gen);
      for (float& v : dy) v = uniform(gen);
      nf4_linear_forward(y.data(), x.data(), c.w, tokens);
      nf4_linear_backward_input(dx.data(), dy.data(), c.w, tokens, /*accumulate=*/true);
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t o = 0; o < rows; ++o) {
          double ref = 0.0;
          for (int64_t i = 0; i < cols; ++i) ref += double(x[t * cols + i]) * c.dense[o * cols + i];
          EXPECT_NEAR(y[t * rows + o], ref, 1e-5) << "y " << t << "," << o;
        }
        for (int64_t i = 0; i < cols; ++i) {
          double ref = 1.0;  // accumulate onto the 1.0 dx held
          for (int64_t o = 0; o < rows; ++o)
            ref += double(dy[t * rows + o]) * c.dense[o * cols + i];
          EXPECT_NEAR(dx[t * cols + i], ref, 1e-5) << "dx " << t << "," << i;
        }
      }
    }
  }
}

// Rows that start on an odd element (odd cols) take the low nibble of a shared byte first.
TEST(Nf4Linear, RowsOfAnOddWidthMatrixEqualTheWholeDequantisation) {
  for (bool dq : {false, true}) {
    LinearCase c = random_linear(7, 33, dq, DType::F32);
    std::vector<float> whole(7 * 33);
    nf4_dequantize_matrix(whole.data(), DType::F32, c.w);
    for (int64_t row0 = 0; row0 < 7; ++row0) {
      for (int64_t nrows = 1; row0 + nrows <= 7; ++nrows) {
        std::vector<float> rows(size_t(nrows * 33));
        nf4_dequantize_rows(rows.data(), c.w, row0, nrows);
        EXPECT_TRUE(std::equal(rows.begin(), rows.end(), whole.begin() + row0 * 33))
            << row0 << "+" << nrows << " dq " << dq;
      }
    }
  }
}

TEST(Nf4Linear, InputGradientOverwritesWithoutAccumulate) {
  LinearCase c = random_linear(70, 64, false, DType::BF16);
  std::vector<float> dy(2 * 70, 0.0f), dx(2 * 64, 5.0f);
  nf4_linear_backward_input(dx.data(), dy.data(), c.w, 2, /*accumulate=*/false);
  for (float v : dx) EXPECT_EQ(v, 0.0f);
}

TEST(Nf4Tensor, ABlocksizeBitsandbytesDoesNotUseIsRefused) {
  std::vector<float> w(4 * 48, 1.0f);
  for (int bs : {0, 48, 8192}) {
    try {
      nf4_quantize_matrix(w.data(), DType::F32, 4, 48, {.blocksize = bs});
      ADD_FAILURE() << "blocksize " << bs << " accepted";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("power of two from 32 to 4096"), std::string::npos);
    }
  }
  EXPECT_EQ(nf4_quantize_matrix(w.data(), DType::F32, 4, 48, {.blocksize = 32}).blocks(), 6);
}

TEST(Nf4Tensor, DoubleQuantSavesWhatThePaperSays) {
  LinearCase plain = random_linear(256, 256, false, DType::BF16);
  LinearCase dq = random_linear(256, 256, true, DType::BF16);
  double n = 256.0 * 256.0;
  // 4 bits + 32/64 bits per weight, against 4 + 8/64 + 32/(64*256) (+ the 1 KiB code table and
  // the offset).
  EXPECT_NEAR(plain.w.storage_bytes() * 8.0 / n, 4.5, 1e-9);
  EXPECT_NEAR((dq.w.storage_bytes() - 1028.0) * 8.0 / n, 4.0 + 8.0 / 64 + 32.0 / (64 * 256), 1e-9);
}

}  // namespace
}  // namespace dsx::kernels
