// Helpers of the checkpoint tests: a temporary directory, and a small multi-rank checkpoint whose
// every value encodes its step and rank, so that a load can tell exactly what it got.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/layout.h"
#include "checkpoint/load.h"
#include "checkpoint/save.h"

namespace dsx::test {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "dsx-ckpt") {
    std::string templ = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    path_ = ::mkdtemp(templ.data()) ? templ : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Sets DSX_CHECKPOINT_THREADS while alive, so the tests run the multi-threaded checksum and copy
// paths on any machine (a machine of few cores uses one thread by default).
class ForcedCheckpointThreads {
 public:
  explicit ForcedCheckpointThreads(int threads) { ::setenv("DSX_CHECKPOINT_THREADS", std::to_string(threads).c_str(), 1); }
  ~ForcedCheckpointThreads() { ::unsetenv("DSX_CHECKPOINT_THREADS"); }
  ForcedCheckpointThreads(const ForcedCheckpointThreads&) = delete;
  ForcedCheckpointThreads& operator=(const ForcedCheckpointThreads&) = delete;
};

// The value element i of `rank`'s partition holds at `step`.
inline float partition_value(int64_t step, int rank, size_t i) {
  return static_cast<float>(step * 1000 + rank * 100) + static_cast<float>(i % 97) * 0.25f;
}

// Saves a checkpoint of `world` ranks the way the engine will: each rank writes its partition
// file (rank 0 also the model states), then rank 0 commits. Returns the manifests.
inline std::vector<checkpoint::RankManifest> save_test_checkpoint(const std::string& dir,
                                                                          const std::string& tag,
                                                                          int world, int64_t step,
                                                                          size_t numel) {
  using namespace checkpoint;
  std::vector<RankManifest> manifests;
  for (int rank = 0; rank < world; ++rank) {
    RankWriter writer(dir, tag, rank);
    std::vector<float> master(numel);
    for (size_t i = 0; i < numel; ++i) master[i] = partition_value(step, rank, i);
    std::vector<int64_t> counters = {step, rank};
    std::vector<TensorRef> tensors = {
        {"master.0", TensorDType::F32, {static_cast<int64_t>(numel)}, master.data()},
        {"counters", TensorDType::I64, {2}, counters.data()},
    };
    std::string meta =
        "{\"step\":" + std::to_string(step) + ",\"rank\":" + std::to_string(rank) + "}";
    writer.write_tensor_file(zero_optim_states_file_name(rank, false), tensors, meta);
    if (rank == 0) {
      std::vector<float> weights(numel / 2 + 1, static_cast<float>(step));
      std::vector<TensorRef> model = {
          {"wte.weight", TensorDType::F32, {static_cast<int64_t>(weights.size())}, weights.data()}};
      writer.write_tensor_file(model_states_file_name(), model,
                               "{\"global_steps\":" + std::to_string(step) + "}");
    }
    manifests.push_back(writer.manifest());
  }
  commit(dir, tag, manifests);
  return manifests;
}

// Loads `tag` (latest when empty) completely, checks every value against its step, and returns
// the step. Fails the calling test (via the returned -1) on any mismatch.
inline int64_t load_and_check(const std::string& dir, const std::string& tag = "") {
  using namespace checkpoint;
  auto reader = CheckpointReader::open(dir, tag);
  reader.verify_all();
  TensorFile model = reader.read_tensor_file(model_states_file_name());
  const auto& wte = model.view("wte.weight");
  std::vector<float> weights(wte.numel());
  model.read("wte.weight", TensorDType::F32, weights.data(), weights.size());
  const int64_t step = static_cast<int64_t>(weights[0]);
  for (float w : weights)
    if (w != static_cast<float>(step)) return -1;
  for (int rank = 0; rank < reader.world_size(); ++rank) {
    TensorFile f = reader.read_tensor_file(zero_optim_states_file_name(rank, false));
    std::vector<float> master(f.view("master.0").numel());
    f.read("master.0", TensorDType::F32, master.data(), master.size());
    for (size_t i = 0; i < master.size(); ++i)
      if (master[i] != partition_value(step, rank, i)) return -1;
    int64_t counters[2];
    f.read("counters", TensorDType::I64, counters, 2);
    if (counters[0] != step || counters[1] != rank) return -1;
    if (f.metadata_json() !=
        "{\"step\":" + std::to_string(step) + ",\"rank\":" + std::to_string(rank) + "}")
      return -1;
  }
  return step;
}

}  // namespace dsx::test
