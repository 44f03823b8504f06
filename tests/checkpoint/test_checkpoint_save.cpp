// The save/commit/load protocol: what lands on disk (DeepSpeed's layout), that `latest` moves only
// after every rank's files are verified, that a damaged checkpoint is refused with an error naming
// the file, and that saving a tag again replaces it without a moment of it being incomplete.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "checkpoint_test_util.h"
#include "dsx/error.h"
#include "tests/engine/test_files.h"
#include "tests/expect_contains.h"

using namespace dsx::checkpoint;
using namespace dsx::test;  // test_files.h: read_all, error_of, load_and_check, save_test_checkpoint, TempDir

namespace {

void flip_byte(const std::string& path, long offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  char c = 0;
  f.read(&c, 1);
  c ^= 0x01;
  f.seekp(offset);
  f.write(&c, 1);
}

}  // namespace

TEST(CheckpointSave, WritesDeepSpeedLayoutAndLoadsBitExactly) {
  TempDir tmp;
  save_test_checkpoint(tmp.path(), "global_step10", 3, 10, 1000);
  EXPECT_EQ(read_all(tmp.file("latest")), "global_step10");
  std::set<std::string> names;
  for (auto& e : std::filesystem::directory_iterator(tmp.file("global_step10")))
    names.insert(e.path().filename().string());
  EXPECT_EQ(names, (std::set<std::string>{"manifest.json", "mp_rank_00_model_states.safetensors",
                                          "zero_pp_rank_0_mp_rank_00_optim_states.safetensors",
                                          "zero_pp_rank_1_mp_rank_00_optim_states.safetensors",
                                          "zero_pp_rank_2_mp_rank_00_optim_states.safetensors"}));
  EXPECT_FALSE(std::filesystem::exists(tmp.file(".global_step10.saving")));  // staging gone
  EXPECT_EQ(load_and_check(tmp.path()), 10);
  auto reader = CheckpointReader::open(tmp.path());
  EXPECT_EQ(reader.tag(), "global_step10");
  EXPECT_EQ(reader.world_size(), 3);
  EXPECT_TRUE(reader.contains("zero_pp_rank_2_mp_rank_00_optim_states.safetensors"));
}

TEST(CheckpointSave, LatestFollowsTheNewestCommitAndOlderTagsStayLoadable) {
  TempDir tmp;
  save_test_checkpoint(tmp.path(), default_tag(1), 2, 1, 64);
  save_test_checkpoint(tmp.path(), default_tag(2), 2, 2, 64);
  EXPECT_EQ(read_all(tmp.file("latest")), "global_step2");
  EXPECT_EQ(load_and_check(tmp.path()), 2);
  EXPECT_EQ(load_and_check(tmp.path(), "global_step1"), 1);
}

TEST(CheckpointSave, SavingTheSameTagAgainReplacesItWhole) {
  TempDir tmp;
  save_test_checkpoint(tmp.path(), "final", 3, 5, 100);
  save_test_checkpoint(tmp.path(), "final", 2, 6, 100);  // smaller world: rank 2's file must go
  EXPECT_EQ(load_and_check(tmp.path()), 6);
  EXPECT_FALSE(std::filesystem::exists(
      tmp.file("final/zero_pp_rank_2_mp_rank_00_optim_states.safetensors")));
  EXPECT_FALSE(std::filesystem::exists(tmp.file(".final.saving")));
}

TEST(CheckpointSave, InterruptedSaveLeavesLatestOnThePreviousCheckpoint) {
  TempDir tmp;
  save_test_checkpoint(tmp.path(), default_tag(1), 2, 1, 64);
  {
    RankWriter w(tmp.path(), default_tag(2), 0);  // rank 0 writes, nobody commits: a crash
    std::vector<float> x(64, 1.0f);
    TensorRef t{"master.0", TensorDType::F32, {64}, x.data()};
    w.write_tensor_file(zero_optim_states_file_name(0, false), {&t, 1}, "{}");
  }
  EXPECT_EQ(read_all(tmp.file("latest")), "global_step1");
  EXPECT_EQ(load_and_check(tmp.path()), 1);
  std::string msg = error_of([&] { CheckpointReader::open(tmp.path(), "global_step2"); });
  EXPECT_CONTAINS(msg, "interrupted");
  // The next save of that tag completes normally over the leftovers.
  save_test_checkpoint(tmp.path(), default_tag(2), 1, 2, 64);
  EXPECT_EQ(load_and_check(tmp.path()), 2);
}

TEST(CheckpointSave, ACommitRemovesWhatKilledSavesLeftBehind) {
  TempDir tmp;
  {
    RankWriter w(tmp.path(), "global_step7", 0);  // killed before its commit
    std::vector<float> x(64, 1.0f);
    TensorRef t{"master.0", TensorDType::F32, {64}, x.data()};
    w.write_tensor_file(zero_optim_states_file_name(0, false), {&t, 1}, "{}");
  }
  ASSERT_TRUE(std::filesystem::exists(tmp.file(".global_step7.saving")));
  save_test_checkpoint(tmp.path(), default_tag(8), 1, 8, 64);
  EXPECT_FALSE(std::filesystem::exists(tmp.file(".global_step7.saving")));
  EXPECT_EQ(load_and_check(tmp.path()), 8);
}

TEST(CheckpointSave, CommitRefusesATruncatedOrCorruptRankFileAndKeepsLatest) {
  TempDir tmp;
  save_test_checkpoint(tmp.path(), default_tag(1), 2, 1, 256);
  for (bool truncate : {true, false}) {
    std::vector<RankManifest> manifests;
    for (int rank = 0; rank < 2; ++rank) {
      RankWriter w(tmp.path(), default_tag(2), rank);
      std::vector<float> x(256, 2.0f);
      TensorRef t{"master.0", TensorDType::F32, {256}, x.data()};
      w.write_tensor_file(zero_optim_states_file_name(rank, false), {&t, 1}, "{}");
      manifests.push_back(w.manifest());
    }
    std::string victim =
        tmp.file(".global_step2.saving/zero_pp_rank_1_mp_rank_00_optim_states.safetensors");
    if (truncate)
      std::filesystem::resize_file(victim, 100);
    else
      flip_byte(victim, 500);
    std::string msg = error_of([&] { commit(tmp.path(), default_tag(2), manifests); });
    EXPECT_CONTAINS(msg, "zero_pp_rank_1_mp_rank_00_optim_states.safetensors");
    EXPECT_CONTAINS(msg, truncate ? "is truncated: 100 bytes" : "is corrupt");
    EXPECT_EQ(read_all(tmp.file("latest")), "global_step1");
    EXPECT_FALSE(std::filesystem::exists(tmp.file("global_step2")));
    EXPECT_EQ(load_and_check(tmp.path()), 1);
  }
}

TEST(CheckpointSave, CommitRefusesManifestsThatAreNotOnePerRank) {
  TempDir tmp;
  RankWriter w(tmp.path(), "t", 1);
  std::vector<RankManifest> only_rank1 = {w.manifest()};
  EXPECT_THROW(commit(tmp.path(), "t", only_rank1), dsx::Error);
}

TEST(CheckpointLoad, RefusesDamagedFilesNamingThem) {
  TempDir tmp;
  save_test_checkpoint(tmp.path(), default_tag(3), 2, 3, 512);
  const std::string rank1 =
      tmp.file("global_step3/zero_pp_rank_1_mp_rank_00_optim_states.safetensors");
  const std::string original = read_all(rank1);

  // A flipped bit in the data: open succeeds (sizes match), reading the file is refused.
  flip_byte(rank1, static_cast<long>(original.size()) - 10);
  auto reader = CheckpointReader::open(tmp.path());
  std::string msg =
      error_of([&] { reader.read_tensor_file(zero_optim_states_file_name(1, false)); });
  EXPECT_CONTAINS(msg, rank1);
  EXPECT_CONTAINS(msg, "is corrupt: its CRC32C is");
  EXPECT_CONTAINS(error_of([&] { reader.verify_all(); }), rank1);
  EXPECT_NO_THROW(reader.read_tensor_file(zero_optim_states_file_name(0, false)));

  // Truncated: refused at open.
  std::filesystem::resize_file(rank1, original.size() / 2);
  msg = error_of([&] { CheckpointReader::open(tmp.path()); });
  EXPECT_CONTAINS(msg, rank1);
  EXPECT_CONTAINS(msg, "is truncated: " + std::to_string(original.size() / 2) +
                           " bytes, the manifest says " + std::to_string(original.size()));

  // Without the all-files check, open succeeds and the damaged file is refused when read.
  auto lazy = CheckpointReader::open(tmp.path(), "", /*check_all_sizes=*/false);
  EXPECT_NO_THROW(lazy.read_tensor_file(zero_optim_states_file_name(0, false)));
  msg = error_of([&] { lazy.read_tensor_file(zero_optim_states_file_name(1, false)); });
  EXPECT_CONTAINS(msg, rank1 + " is truncated");

  // Missing.
  std::filesystem::remove(rank1);
  msg = error_of([&] { CheckpointReader::open(tmp.path()); });
  EXPECT_CONTAINS(msg, rank1);
  EXPECT_CONTAINS(msg, "is missing");
}

// Files past the sizes where saves checksum beside the write and loads checksum and copy on
// several threads (4 MiB pieces): 6 MiB partitions round-trip exactly, and one flipped byte in the middle of
// one is refused by the load and by the commit-time check, naming that file.
TEST(CheckpointLoad, LargeFilesRoundTripAndRefuseOneFlippedByte) {
  ForcedCheckpointThreads threads(2);
  TempDir tmp;
  const size_t numel = (6u << 20) / 4 + 3;
  save_test_checkpoint(tmp.path(), default_tag(4), 2, 4, numel);
  auto reader = CheckpointReader::open(tmp.path());
  for (int rank = 0; rank < 2; ++rank) {
    TensorFile f = reader.read_tensor_file(zero_optim_states_file_name(rank, false));
    std::vector<float> master(numel);
    f.read("master.0", TensorDType::F32, master.data(), numel);
    for (size_t i = 0; i < numel; i += 4099) ASSERT_EQ(master[i], partition_value(4, rank, i)) << i;
    ASSERT_EQ(master.back(), partition_value(4, rank, numel - 1));
  }
  const std::string rank0 = tmp.file("global_step4/zero_pp_rank_0_mp_rank_00_optim_states.safetensors");
  const std::string rank1 = tmp.file("global_step4/zero_pp_rank_1_mp_rank_00_optim_states.safetensors");
  flip_byte(rank1, 3 << 20);
  std::string msg = error_of([&] { reader.read_tensor_file(zero_optim_states_file_name(1, false)); });
  EXPECT_CONTAINS(msg, rank1 + " is corrupt");
  EXPECT_CONTAINS(error_of([&] { reader.verify_all(); }), rank1 + " is corrupt");
  // Both damaged: the files are checked side by side, and the first in the manifest is named.
  flip_byte(rank0, 5 << 20);
  EXPECT_CONTAINS(error_of([&] { reader.verify_all(); }), rank0 + " is corrupt");
}

// The one-pass load: tensors copied into the caller's buffers while the file is checksummed.
// Exact values at small and multi-piece sizes; a flipped data byte, a damaged header and a wrong
// request are each refused with the error that says what happened.
TEST(CheckpointLoad, ReadIntoBuffersVerifiesInTheSamePass) {
  ForcedCheckpointThreads threads(2);
  TempDir tmp;
  for (size_t numel : {size_t{300}, size_t{(6u << 20) / 4 + 3}}) {
    const std::string tag = default_tag(static_cast<int64_t>(numel));
    save_test_checkpoint(tmp.path(), tag, 1, 5, numel);
    auto reader = CheckpointReader::open(tmp.path(), tag);
    std::vector<float> master(numel, -1.0f);
    std::vector<int64_t> counters(2, -1);
    const std::vector<TensorDestination> into = {
        {"master.0", TensorDType::F32, master.data(), numel},
        {"counters", TensorDType::I64, counters.data(), 2}};
    const std::string name = zero_optim_states_file_name(0, false);
    TensorFile f = reader.read_tensor_file_into(name, into);
    for (size_t i = 0; i < numel; ++i) ASSERT_EQ(master[i], partition_value(5, 0, i)) << i;
    EXPECT_EQ(counters, (std::vector<int64_t>{5, 0}));
    EXPECT_CONTAINS(f.metadata_json(), "\"step\":5");

    const std::vector<TensorDestination> wrong = {{"master.0", TensorDType::F32, master.data(), numel - 1}};
    EXPECT_CONTAINS(error_of([&] { reader.read_tensor_file_into(name, wrong); }),
                    "elements, expected F32 with " + std::to_string(numel - 1));
    const std::string path = reader.directory() + "/" + name;
    flip_byte(path, static_cast<long>(std::filesystem::file_size(path)) - 7);
    EXPECT_CONTAINS(error_of([&] { reader.read_tensor_file_into(name, into); }), path + " is corrupt");
    flip_byte(path, static_cast<long>(std::filesystem::file_size(path)) - 7);
    flip_byte(path, 8);  // the header's opening brace: it no longer parses
    EXPECT_CONTAINS(error_of([&] { reader.read_tensor_file_into(name, into); }), path + " is corrupt");
  }
}

// The one-pass load for a consumer that uses the bytes where they lie: every tensor's bytes reach
// it once, in file order, pieces of at most one 256 KiB block, with the exact values saved.
TEST(CheckpointLoad, VisitingHandsOutEveryByteOnceInFileOrder) {
  TempDir tmp;
  const size_t numel = (3u << 20) / 4 + 5;  // 3 MiB and a bit: a dozen blocks, an odd tail
  save_test_checkpoint(tmp.path(), default_tag(7), 1, 7, numel);
  auto reader = CheckpointReader::open(tmp.path());
  std::vector<float> master(numel, -1.0f);
  std::vector<int64_t> counters(2, -1);
  std::vector<uint64_t> next_offset(2, 0);
  double sum = 0;  // what a consumer computes in place, against a sum of the saved values
  const std::vector<TensorToVisit> tensors = {{"master.0", TensorDType::F32, numel},
                                              {"counters", TensorDType::I64, 2}};
  TensorFile f = reader.read_tensor_file_visiting(
      zero_optim_states_file_name(0, false), tensors,
      [&](size_t t, uint64_t offset, const uint8_t* bytes, size_t size) {
        ASSERT_LT(t, 2u);
        ASSERT_EQ(offset, next_offset[t]);  // in order, nothing skipped or repeated
        ASSERT_LE(size, size_t{256} << 10);
        next_offset[t] += size;
        uint8_t* to = t == 0 ? reinterpret_cast<uint8_t*>(master.data())
                             : reinterpret_cast<uint8_t*>(counters.data());
        std::memcpy(to + offset, bytes, size);
        if (t == 0)
          for (size_t i = 0; i < size / 4; ++i) sum += reinterpret_cast<const float*>(bytes)[i];
      });
  EXPECT_EQ(next_offset, (std::vector<uint64_t>{numel * 4, 16}));
  double expected_sum = 0;
  for (size_t i = 0; i < numel; ++i) {
    ASSERT_EQ(master[i], partition_value(7, 0, i)) << i;
    expected_sum += partition_value(7, 0, i);
  }
  EXPECT_EQ(sum, expected_sum);  // every value once (the pieces hold whole floats)
  EXPECT_EQ(counters, (std::vector<int64_t>{7, 0}));
  EXPECT_CONTAINS(f.metadata_json(), "\"step\":7");
}

// A byte flipped in the first, a middle or the last block, a file cut short by a byte, and one
// shorter than safetensors' 8-byte length: both one-pass loads refuse each, naming the file; once
// the byte is restored the same reader loads the file again.
TEST(CheckpointLoad, OnePassLoadsRefuseDamageInAnyBlock) {
  TempDir tmp;
  const size_t numel = (2u << 20) / 4;  // 2 MiB: eight blocks
  save_test_checkpoint(tmp.path(), default_tag(3), 1, 3, numel);
  auto reader = CheckpointReader::open(tmp.path());
  const std::string name = zero_optim_states_file_name(0, false);
  const std::string path = reader.directory() + "/" + name;
  std::vector<float> master(numel);
  const std::vector<TensorDestination> into = {
      {"master.0", TensorDType::F32, master.data(), numel}};
  const std::vector<TensorToVisit> visit = {{"master.0", TensorDType::F32, numel}};
  size_t visited = 0;
  auto load_into = [&] { reader.read_tensor_file_into(name, into); };
  auto load_visiting = [&] {
    reader.read_tensor_file_visiting(
        name, visit, [&](size_t, uint64_t, const uint8_t*, size_t n) { visited += n; });
  };
  const long size = static_cast<long>(std::filesystem::file_size(path));
  const long data_start =
      size - static_cast<long>(numel * 4) - 16;  // counters (widest first), master.0
  for (long offset : {data_start + 1, size / 2, size - 1}) {
    flip_byte(path, offset);
    EXPECT_CONTAINS(error_of(load_into), path + " is corrupt") << offset;
    EXPECT_CONTAINS(error_of(load_visiting), path + " is corrupt") << offset;
    flip_byte(path, offset);
  }
  EXPECT_NO_THROW(load_into());
  EXPECT_EQ(master[numel - 1], partition_value(3, 0, numel - 1));
  visited = 0;
  EXPECT_NO_THROW(load_visiting());
  EXPECT_EQ(visited, numel * 4);
  for (long cut : {size - 1, 4L}) {
    std::filesystem::resize_file(path, static_cast<uintmax_t>(cut));
    EXPECT_CONTAINS(error_of(load_into), path + " is truncated: " + std::to_string(cut) + " bytes");
    EXPECT_CONTAINS(error_of(load_visiting),
                    path + " is truncated: " + std::to_string(cut) + " bytes");
  }
}

TEST(CheckpointLoad, ExplainsMissingOrBrokenLatestAndManifest) {
  TempDir tmp;
  std::string msg = error_of([&] { CheckpointReader::open(tmp.path()); });
  EXPECT_CONTAINS(msg, tmp.file("latest") + " does not exist");

  save_test_checkpoint(tmp.path(), default_tag(4), 1, 4, 16);
  write_file_durably(tmp.file("latest"), "../../etc");
  msg = error_of([&] { CheckpointReader::open(tmp.path()); });
  EXPECT_CONTAINS(msg, "does not hold a valid tag");

  write_file_durably(tmp.file("latest"), "global_step99\n");
  msg = error_of([&] { CheckpointReader::open(tmp.path()); });
  EXPECT_CONTAINS(msg, tmp.file("global_step99") + " does not exist");

  write_file_durably(tmp.file("latest"), "  global_step4\n");  // DeepSpeed strips whitespace
  EXPECT_EQ(load_and_check(tmp.path()), 4);

  write_file_durably(tmp.file("global_step4/manifest.json"), "{\"format\": \"dsx-checkpoint\",");
  msg = error_of([&] { CheckpointReader::open(tmp.path()); });
  EXPECT_CONTAINS(msg, tmp.file("global_step4/manifest.json"));
  EXPECT_CONTAINS(msg, "manifest.json:1:29: invalid JSON");

  std::filesystem::remove(tmp.file("global_step4/manifest.json"));
  msg = error_of([&] { CheckpointReader::open(tmp.path()); });
  EXPECT_CONTAINS(msg, "has no manifest.json");
}

TEST(CheckpointLoad, FileOfAnotherWorldSizeIsNamedAsSuch) {
  TempDir tmp;
  save_test_checkpoint(tmp.path(), "t", 2, 1, 16);
  auto reader = CheckpointReader::open(tmp.path(), "t");
  std::string msg =
      error_of([&] { reader.read_tensor_file(zero_optim_states_file_name(5, false)); });
  EXPECT_CONTAINS(msg, "zero_pp_rank_5_mp_rank_00_optim_states.safetensors");
  EXPECT_CONTAINS(msg, "different world size");
}
