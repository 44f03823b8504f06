// ZeRO-Infinity's parameter swap (offload_param.device "nvme", stage 3): this rank's partition
// of the working parameters (the model's dtype) lives in one swap file under nvme_path, as
// DeepSpeed's AsyncPartitionedParameterSwapper keeps it (ref/lora_qlora_nvme.md §3.4):
//
//   max_in_cpu    elements of the partition that stay in host memory: the layers, in order,
//                 whose partitions fit in it (a prefix of the partition) never touch the disk;
//   buffer_count  host buffers that stage reads and writes;
//   buffer_size   no swapped layer's partition may be larger (elements); each buffer is sized
//                 to the largest swapped layer, where DeepSpeed allocates buffer_size whole.
//
// A read of layer l (on ZeRO's communication stream, when the layer is gathered) also starts the
// reads of the next swapped layers in the direction the model is going (forward: l+1, ...;
// backward: l-1, ...) into the free buffers, so the disk works while the model computes.
// Writes go through a buffer too; a write that covers part of a disk block reads the block first.
// The file is per-run scratch (swap/swap_directory.h): checkpoints save the fp32 master, never it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "swap/aio_handle.h"
#include "swap/aligned_buffer.h"
#include "swap/swap_directory.h"
#include "zero/memory.h"

namespace dsx::zero {

struct ParamSwapOptions {
  std::string nvme_path;
  size_t buffer_count = 5;
  size_t buffer_size = 100'000'000;   // elements
  size_t max_in_cpu = 1'000'000'000;  // elements
  bool pin_memory = true;
  swap::AioOptions aio;
};

class ParamSwapper {
 public:
  // `layers`: each layer's elements [begin, end) of the partition, in order, covering [0, numel);
  // `esize`: bytes per element. The resident prefix and the buffers are charged to `ledger`.
  ParamSwapper(const ParamSwapOptions& options, std::vector<std::pair<size_t, size_t>> layers,
               size_t numel, size_t esize, int rank, MemoryLedger& ledger);
  ~ParamSwapper();
  ParamSwapper(const ParamSwapper&) = delete;
  ParamSwapper& operator=(const ParamSwapper&) = delete;

  // Elements [0, resident_numel()) live in host memory; the rest on the disk.
  size_t resident_numel() const { return resident_numel_; }
  bool swapped(int layer) const {
    return layers_[static_cast<size_t>(layer)].first >= resident_numel_;
  }
  const std::string& file() const { return file_; }

  // Copies layer `layer`'s elements to `out` (host memory), and starts the reads ahead.
  void read_layer(int layer, void* out);
  // Stores elements [begin, begin + count) of the partition from `src` (host memory).
  void write(size_t begin, size_t count, const void* src);
  // Copies elements [begin, begin + count) of the partition to `out` (host memory).
  void read(size_t begin, size_t count, void* out);
  size_t disk_reads() const { return disk_reads_; }  // layer reads served from the disk

 private:
  struct Slot;
  Slot& slot_for(int layer);  // the buffer holding (or about to hold) the layer's read
  void start_read(Slot& slot, int layer);
  void read_ahead(int layer);
  void forget_reads();  // waits for every read in flight and drops what the buffers hold
  // [first, last) bytes of the file widened to whole disk blocks.
  std::pair<size_t, size_t> window(size_t begin, size_t end) const;
  // Where a chunk of a long write or read that starts at element lo ends: its window fits a buffer.
  size_t chunk_end(size_t lo, size_t end) const;

  ParamSwapOptions options_;
  std::vector<std::pair<size_t, size_t>> layers_;
  size_t numel_;
  size_t esize_;
  size_t resident_numel_ = 0;
  MemoryLedger& ledger_;
  std::vector<uint8_t> resident_;  // elements [0, resident_numel_)
  swap::SwapDirectory directory_;
  std::string file_;
  swap::AioHandle reader_;
  swap::AioHandle writer_;
  std::vector<std::unique_ptr<Slot>> slots_;
  size_t buffer_bytes_ = 0;
  int last_layer_ = -1;
  size_t disk_reads_ = 0;
  std::mutex mutex_;  // reads run on the communication stream, writes on the step's thread
};

}  // namespace dsx::zero
