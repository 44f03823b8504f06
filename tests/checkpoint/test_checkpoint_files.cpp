// The pieces under a checkpoint: CRC32C against RFC 3720's vectors (hardware and table paths),
// durable files, manifests, tags and names, and safetensors files written by dsx read back by the
// models library's reader with every byte and the metadata intact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "checkpoint_test_util.h"
#include "dsx/error.h"
#include "checkpoint/crc32c.h"
#include "checkpoint/durable_file.h"
#include "checkpoint/manifest.h"
#include "checkpoint/parallel_bytes.h"
#include "checkpoint/tag_validation.h"
#include "checkpoint/tensor_file.h"
#include "checkpoint/verify.h"
#include "tests/engine/test_files.h"

using dsx::test::read_all;
using dsx::test::error_of;

using namespace dsx::checkpoint;
using dsx::test::TempDir;

namespace {

}  // namespace

TEST(CheckpointCrc32c, Rfc3720Vectors) {
  uint8_t buf[32];
  std::memset(buf, 0, 32);
  EXPECT_EQ(crc32c(buf, 32), 0x8a9136aau);
  std::memset(buf, 0xff, 32);
  EXPECT_EQ(crc32c(buf, 32), 0x62a8ab43u);
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(crc32c(buf, 32), 0x46dd794eu);
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<uint8_t>(31 - i);
  EXPECT_EQ(crc32c(buf, 32), 0x113fdb5cu);
  EXPECT_EQ(crc32c("123456789", 9), 0xe3069283u);
  EXPECT_EQ(crc32c(nullptr, 0), 0u);
}

TEST(CheckpointCrc32c, HardwareAndTableAgreeAtEveryLengthAndAlignment) {
  std::mt19937 rng(7);
  std::vector<uint8_t> data(1100);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  for (size_t offset = 0; offset < 9; ++offset)
    for (size_t n = 0; n + offset <= 1030; n += 1 + n / 16) {
      uint32_t fast = crc32c(data.data() + offset, n);
      ASSERT_EQ(fast, crc32c_extend_portable(0, data.data() + offset, n)) << offset << " " << n;
      // Extending in two pieces equals one pass.
      size_t cut = n / 3;
      ASSERT_EQ(fast, crc32c_extend(crc32c(data.data() + offset, cut), data.data() + offset + cut,
                                    n - cut));
    }
}

// Every kernel this CPU runs, each named so a failure says which.
std::vector<Crc32cKernel> available_kernels() {
  std::vector<Crc32cKernel> kernels;
  for (auto k : {Crc32cKernel::Portable, Crc32cKernel::Sse42, Crc32cKernel::Pclmul,
                 Crc32cKernel::Vpclmul})
    if (crc32c_kernel_available(k)) kernels.push_back(k);
  return kernels;
}

TEST(CheckpointCrc32c, EveryKernelMeetsRfc3720Vectors) {
  uint8_t zeros[32] = {}, ascending[32], big[4096];
  for (int i = 0; i < 32; ++i) ascending[i] = static_cast<uint8_t>(i);
  for (int i = 0; i < 4096; ++i) big[i] = static_cast<uint8_t>(i * 7 + 3);
  const uint32_t big_reference = crc32c_extend_portable(0, big, sizeof big);
  for (Crc32cKernel k : available_kernels()) {
    SCOPED_TRACE(crc32c_kernel_name(k));
    EXPECT_EQ(crc32c_extend_with(k, 0, zeros, 32), 0x8a9136aau);
    EXPECT_EQ(crc32c_extend_with(k, 0, ascending, 32), 0x46dd794eu);
    EXPECT_EQ(crc32c_extend_with(k, 0, "123456789", 9), 0xe3069283u);
    EXPECT_EQ(crc32c_extend_with(k, 0, big, sizeof big), big_reference);
  }
  // The dispatch picks AVX-512 folding where the CPU has it.
  EXPECT_TRUE(crc32c_kernel_available(crc32c_fastest_kernel()));
  if (crc32c_kernel_available(Crc32cKernel::Vpclmul)) {
    EXPECT_EQ(crc32c_fastest_kernel(), Crc32cKernel::Vpclmul);
  }
}

// The folding kernels against the table version at every length 0..4096 and every alignment
// 0..63 (each start and tail length of the 16-, 64- and 256-byte blocks), from a nonzero CRC.
TEST(CheckpointCrc32c, FoldingKernelsAgreeAtEveryLengthAndAlignment) {
  std::mt19937 rng(5);
  std::vector<uint8_t> data(4096 + 64);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  for (Crc32cKernel k : available_kernels()) {
    if (k == Crc32cKernel::Portable) continue;
    SCOPED_TRACE(crc32c_kernel_name(k));
    for (size_t offset = 0; offset < 64; ++offset)
      for (size_t n = 0; n <= 4096; ++n) {
        const uint32_t start = static_cast<uint32_t>(n * 2654435761u + offset);
        const uint8_t* p = data.data() + offset;
        ASSERT_EQ(crc32c_extend_with(k, start, p, n), crc32c_extend_portable(start, p, n))
            << "offset " << offset << " length " << n;
      }
  }
}

TEST(CheckpointCrc32c, FoldingKernelsAgreeOnLargeBuffers) {
  std::mt19937 rng(13);
  std::vector<uint8_t> data((8u << 20) + 77);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  for (Crc32cKernel k : available_kernels()) {
    SCOPED_TRACE(crc32c_kernel_name(k));
    for (size_t n : {size_t{65'537}, size_t{1} << 20, data.size() - 13}) {
      const uint32_t want = crc32c_extend_portable(0x9abcdef0u, data.data() + 13, n);
      ASSERT_EQ(crc32c_extend_with(k, 0x9abcdef0u, data.data() + 13, n), want) << n;
    }
  }
}

TEST(CheckpointCrc32c, CombiningPiecesEqualsOnePass) {
  std::mt19937 rng(17);
  std::vector<uint8_t> data(300'000);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  for (size_t cut : {size_t{0}, size_t{1}, size_t{4}, size_t{1000}, size_t{131'072}, data.size()}) {
    const uint32_t a = crc32c(data.data(), cut), b = crc32c(data.data() + cut, data.size() - cut);
    EXPECT_EQ(crc32c_combine(a, b, data.size() - cut), crc32c(data.data(), data.size())) << cut;
  }
  EXPECT_EQ(crc32c_combine(0x12345678u, 0, 0), 0x12345678u);
}

// Buffers large enough to be cut into one piece per thread (4 MiB each) give the one-pass CRC and
// an exact copy; so does a DurableFile whose large writes are checksummed beside the write.
TEST(CheckpointCrc32c, ParallelPiecesAndOverlappedWritesEqualOnePass) {
  dsx::test::ForcedCheckpointThreads threads(3);
  ASSERT_EQ(io_threads(), 3u);
  std::mt19937 rng(19);
  std::vector<uint8_t> data((13u << 20) + 5);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  for (size_t n : {size_t{100}, size_t{8u << 20}, data.size()}) {
    ASSERT_EQ(crc32c_parallel(data.data(), n), crc32c(data.data(), n)) << n;
    std::vector<uint8_t> copy(n);
    copy_parallel(copy.data(), data.data(), n);
    ASSERT_TRUE(std::equal(copy.begin(), copy.end(), data.begin())) << n;
    // Two ranges copied while checksumming, one across the pieces' borders.
    std::vector<uint8_t> head(n / 3), tail(n - n / 2);
    const std::vector<CopyRange> ranges = {{0, head.size(), head.data()}, {n / 2, tail.size(), tail.data()}};
    ASSERT_EQ(crc32c_and_copy(data.data(), n, ranges), crc32c(data.data(), n)) << n;
    ASSERT_TRUE(std::equal(head.begin(), head.end(), data.begin())) << n;
    ASSERT_TRUE(std::equal(tail.begin(), tail.end(), data.begin() + static_cast<long>(n / 2))) << n;
  }
  TempDir tmp;
  DurableFile f(tmp.file("big.bin"));
  f.write(data.data(), 7);
  f.write(data.data() + 7, (9u << 20));
  f.write(data.data() + 7 + (9u << 20), data.size() - 7 - (9u << 20));
  f.commit();
  EXPECT_EQ(f.crc32c(), crc32c(data.data(), data.size()));
  EXPECT_EQ(measure_file(tmp.file("big.bin")).crc32c, f.crc32c());
}

TEST(CheckpointCrc32c, ThreeStreamPathAgreesOnLargeBuffers) {
  // Buffers past 3 x 8 KiB take the three-stream path whose states are joined by shifting.
  std::mt19937 rng(11);
  std::vector<uint8_t> data(200'003);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  for (size_t n : {24'575u, 24'576u, 24'577u, 49'152u, 73'731u, 200'000u}) {
    for (size_t offset : {0u, 3u}) {
      ASSERT_EQ(crc32c(data.data() + offset, n), crc32c_extend_portable(0, data.data() + offset, n))
          << n;
      ASSERT_EQ(crc32c_extend(0x12345678u, data.data() + offset, n),
                crc32c_extend_portable(0x12345678u, data.data() + offset, n))
          << n;
    }
  }
}

TEST(CheckpointCrc32c, TfRecordMask) {
  // TensorFlow's masking: rotate right by 15, add 0xa282ead8 (mod 2^32).
  EXPECT_EQ(mask_crc32c(0), 0xa282ead8u);
  EXPECT_EQ(mask_crc32c(0x8000u), 0xa282ead8u + 1u);
  EXPECT_EQ(mask_crc32c(0xe3069283u), ((0xe3069283u >> 15) | (0xe3069283u << 17)) + 0xa282ead8u);
}

TEST(CheckpointDurableFile, CommitPublishesSizeAndCrc) {
  TempDir tmp;
  DurableFile f(tmp.file("a.bin"));
  f.write("hello ", 6);
  f.write(std::string_view("world"));
  EXPECT_FALSE(std::filesystem::exists(tmp.file("a.bin")));  // not before commit
  f.commit();
  EXPECT_EQ(read_all(tmp.file("a.bin")), "hello world");
  EXPECT_EQ(f.size(), 11u);
  EXPECT_EQ(f.crc32c(), crc32c("hello world", 11));
  FileRecord measured = measure_file(tmp.file("a.bin"));
  EXPECT_EQ(measured.size, 11u);
  EXPECT_EQ(measured.crc32c, f.crc32c());
}

TEST(CheckpointDurableFile, AbandonedWriteLeavesOldFileAndNoTemporary) {
  TempDir tmp;
  write_file_durably(tmp.file("x"), "old");
  {
    DurableFile f(tmp.file("x"));
    f.write("new and longer", 14);
  }  // destroyed without commit: a failed save
  EXPECT_EQ(read_all(tmp.file("x")), "old");
  int entries = 0;
  for (auto& e : std::filesystem::directory_iterator(tmp.path())) entries += e.exists();
  EXPECT_EQ(entries, 1);
}

TEST(CheckpointDurableFile, MissingDirectoryNamesThePath) {
  TempDir tmp;
  std::string msg = error_of([&] { DurableFile f(tmp.file("no/such/dir/file")); });
  EXPECT_NE(msg.find(tmp.file("no/such/dir/file")), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;
}

TEST(CheckpointManifest, RoundTripsThroughJson) {
  RankManifest m{3, {{"a.safetensors", 1234, 0xdeadbeef}, {"b.safetensors", 0, 0}}};
  EXPECT_EQ(RankManifest::from_json(m.to_json(), "test"), m);
  CheckpointManifest all;
  all.tag = "global_step7";
  all.world_size = 2;
  all.ranks = {{0, {{"x", 1, 2}}}, {1, {{"y", 3, 4}}}};
  auto back = CheckpointManifest::from_json(all.to_json(), "test");
  EXPECT_EQ(back.tag, "global_step7");
  EXPECT_EQ(back.world_size, 2);
  ASSERT_EQ(back.ranks.size(), 2u);
  EXPECT_EQ(back.ranks[1], all.ranks[1]);
  ASSERT_NE(back.find("y"), nullptr);
  EXPECT_EQ(back.find("y")->crc32c, 4u);
  EXPECT_EQ(back.find("z"), nullptr);
  EXPECT_FALSE(back.node);
  EXPECT_EQ(back.step, -1);
}

// A node's copy on node-local storage lists only its ranks, and says which node it is.
TEST(CheckpointManifest, NodePartRoundTripsAndIsChecked) {
  CheckpointManifest part;
  part.tag = "global_step4";
  part.world_size = 4;
  part.ranks = {{2, {{"a", 1, 2}}}, {3, {{"b", 3, 4}}}};
  part.node = NodePart{1, 2};
  part.save_id = "00ff00ff00ff00ff";
  part.step = 4;
  auto back = CheckpointManifest::from_json(part.to_json(), "test");
  ASSERT_TRUE(back.node);
  EXPECT_EQ(back.node->index, 1);
  EXPECT_EQ(back.node->count, 2);
  EXPECT_EQ(back.save_id, "00ff00ff00ff00ff");
  EXPECT_EQ(back.step, 4);
  ASSERT_EQ(back.ranks.size(), 2u);
  EXPECT_EQ(back.ranks[0].rank, 2);
  part.ranks = {{3, {}}, {2, {}}};  // not ascending
  EXPECT_NE(error_of([&] { CheckpointManifest::from_json(part.to_json(), "m"); }).find("ascending"),
            std::string::npos);
  part.ranks = {{2, {}}};
  part.node = NodePart{2, 2};  // no node 2 of 2
  EXPECT_NE(error_of([&] { CheckpointManifest::from_json(part.to_json(), "m"); }).find("is not one of 2 nodes"),
            std::string::npos);
}

TEST(CheckpointManifest, RefusesMalformedInputNamingIt) {
  const char* bad[] = {
      "",
      "[]",
      "{\"rank\": 0}",
      "{\"rank\": -1, \"files\": []}",
      "{\"rank\": 0, \"files\": [{\"name\": \"a\", \"size\": 1, \"crc32c\": \"xyz\"}]}",
      "{\"rank\": 0, \"files\": [{\"name\": \"../etc/passwd\", \"size\": 1, \"crc32c\": "
      "\"00000000\"}]}",
      "{\"rank\": 0, \"files\": [{\"name\": \"a\", \"size\": -5, \"crc32c\": \"00000000\"}]}",
  };
  for (const char* text : bad) {
    std::string msg = error_of([&] { RankManifest::from_json(text, "rank 5's manifest"); });
    EXPECT_NE(msg.find("rank 5's manifest"), std::string::npos) << text << " -> " << msg;
  }
  CheckpointManifest all;
  all.tag = "t";
  all.world_size = 2;
  all.ranks = {{0, {{"x", 1, 2}}}, {1, {{"x", 3, 4}}}};
  EXPECT_NE(
      error_of([&] { CheckpointManifest::from_json(all.to_json(), "m"); }).find("listed twice"),
      std::string::npos);
}

TEST(CheckpointLayout, DeepSpeedNamesAndTags) {
  EXPECT_EQ(default_tag(120), "global_step120");
  EXPECT_EQ(model_states_file_name(), "mp_rank_00_model_states.safetensors");
  EXPECT_EQ(zero_optim_states_file_name(3, false),
            "zero_pp_rank_3_mp_rank_00_optim_states.safetensors");
  EXPECT_EQ(zero_optim_states_file_name(0, true),
            "bf16_zero_pp_rank_0_mp_rank_00_optim_states.safetensors");
  EXPECT_EQ(zero_model_states_file_name(1), "zero_pp_rank_1_mp_rank_00_model_states.safetensors");
  EXPECT_NO_THROW(check_tag("global_step5"));
  EXPECT_NO_THROW(check_tag("my run: final"));
  for (std::string tag :
       {std::string(""), std::string("a/b"), std::string(".."), std::string(".hidden"),
        std::string("latest"), std::string("bad\nline"), std::string(300, 'x')}) {
    std::string msg = error_of([&] { check_tag(tag); });
    EXPECT_NE(msg.find("checkpoint tag"), std::string::npos) << "tag accepted: " << tag;
  }
  // issue 33, item 22: a path is refused for being a path, not for its leading dot.
  for (std::string tag : {std::string("../../etc"), std::string(".."), std::string("./x")}) {
    std::string msg = error_of([&] { check_tag(tag); });
    EXPECT_EQ(msg.find("starts with '.'"), std::string::npos) << tag << ": " << msg;
    EXPECT_NE(msg.find("one directory inside the save directory"), std::string::npos)
        << tag << ": " << msg;
  }
}

TEST(CheckpointTensorFile, WritesWhatTheModelsReaderReadsBack) {
  TempDir tmp;
  std::vector<float> f32 = {1.5f, -2.0f, 3.25f, 1e-30f, 7.0f, 0.0f};
  std::vector<uint16_t> bf16 = {0x3f80, 0xc000, 0x7fc0};
  std::vector<int64_t> i64 = {-1, 1LL << 40};
  std::vector<double> f64 = {3.141592653589793};
  std::vector<uint8_t> u8 = {1, 2, 3};
  std::vector<TensorRef> tensors = {
      {"u8", TensorDType::U8, {3}, u8.data()},       {"bf16", TensorDType::BF16, {3}, bf16.data()},
      {"f32", TensorDType::F32, {2, 3}, f32.data()}, {"empty", TensorDType::F32, {0, 4}, nullptr},
      {"i64", TensorDType::I64, {2}, i64.data()},    {"f64", TensorDType::F64, {}, f64.data()},
  };
  DurableFile out(tmp.file("t.safetensors"));
  write_safetensors(out, tensors, "{\"step\": 12, \"rng\": [1, 2, 3]}");
  out.commit();

  TensorFile file = TensorFile::load(tmp.file("t.safetensors"));
  EXPECT_EQ(file.names(), (std::vector<std::string>{"bf16", "empty", "f32", "f64", "i64", "u8"}));
  EXPECT_EQ(file.metadata_json(), "{\"step\": 12, \"rng\": [1, 2, 3]}");
  EXPECT_EQ(file.metadata().at("format"), "pt");
  std::vector<float> f32_back(6);
  file.read("f32", TensorDType::F32, f32_back.data(), 6);
  EXPECT_EQ(f32_back, f32);
  EXPECT_EQ(file.view("f32").shape, (std::vector<int64_t>{2, 3}));
  std::vector<uint16_t> bf16_back(3);
  file.read("bf16", TensorDType::BF16, bf16_back.data(), 3);
  EXPECT_EQ(bf16_back, bf16);
  int64_t i64_back[2];
  file.read("i64", TensorDType::I64, i64_back, 2);
  EXPECT_EQ(i64_back[1], 1LL << 40);
  double f64_back = 0;
  file.read("f64", TensorDType::F64, &f64_back, 1);
  EXPECT_EQ(f64_back, f64[0]);
  EXPECT_EQ(file.view("empty").numel(), 0u);
  // Widest dtype first: every tensor sits at a multiple of its element size in the file.
  for (const auto& name : file.names()) {
    const auto& v = file.view(name);
    size_t esize = dsx::models::safetensors_dtype_size(v.dtype);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data) % esize, 0u) << name;
  }
  // Wrong dtype or count: a clear error naming the file and the tensor.
  std::string msg = error_of([&] { file.read("f32", TensorDType::BF16, bf16_back.data(), 6); });
  EXPECT_NE(msg.find("t.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"f32\" is F32 with 6 elements, expected BF16"), std::string::npos) << msg;
  msg = error_of([&] { file.view("nope"); });
  EXPECT_NE(msg.find("has no tensor \"nope\""), std::string::npos) << msg;
}

TEST(CheckpointTensorFile, RefusesMetadataThatIsNotAJsonObject) {
  TempDir tmp;
  DurableFile out(tmp.file("t.safetensors"));
  EXPECT_THROW(write_safetensors(out, {}, "{not json"), dsx::Error);
  EXPECT_THROW(write_safetensors(out, {}, "[1,2]"), dsx::Error);
}

TEST(CheckpointTagValidation, IgnoreWarnFailAsDeepSpeed) {
  EXPECT_EQ(parse_tag_validation("warn"), TagValidation::Warn);
  EXPECT_EQ(parse_tag_validation("FAIL"), TagValidation::Fail);
  EXPECT_EQ(parse_tag_validation("Ignore"), TagValidation::Ignore);
  std::string msg = error_of([] { parse_tag_validation("strict"); });
  EXPECT_NE(msg.find("checkpoint.tag_validation is \"strict\""), std::string::npos) << msg;

  const std::vector<std::string> same = {"global_step5", "global_step5", "global_step5"};
  const std::vector<std::string> differ = {"step5_rank0", "step5_rank1", "step5_rank2"};
  for (auto mode : {TagValidation::Ignore, TagValidation::Warn, TagValidation::Fail})
    EXPECT_FALSE(check_tag_agreement(mode, 0, same));
  EXPECT_FALSE(check_tag_agreement(TagValidation::Ignore, 1, differ));
  auto warning = check_tag_agreement(TagValidation::Warn, 1, differ);
  ASSERT_TRUE(warning);
  EXPECT_NE(
      warning->find(
          "[rank=1] The checkpoint tag name 'step5_rank1' is not consistent across all ranks"),
      std::string::npos)
      << *warning;
  msg = error_of([&] { check_tag_agreement(TagValidation::Fail, 2, differ); });
  EXPECT_NE(msg.find("'step5_rank2' is not consistent"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 0 saves 'step5_rank0'"), std::string::npos) << msg;
}
