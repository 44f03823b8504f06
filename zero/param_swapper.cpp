// The partition's working parameters in a swap file (see param_swapper.h).
#include "zero/param_swapper.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "dsx/error.h"

namespace dsx::zero {

struct ParamSwapper::Slot {
  swap::AlignedBuffer buffer;
  swap::IoTicket read;
  int layer = -1;           // the layer read (or being read) into the buffer; -1: free
  size_t window_begin = 0;  // file byte of the buffer's first byte
};

namespace {

constexpr size_t kBlock = swap::kDirectAlignment;

size_t align_down(size_t n) { return n / kBlock * kBlock; }

// The prefix of whole layers that fits in max_in_cpu elements.
size_t resident_prefix(const std::vector<std::pair<size_t, size_t>>& layers, size_t max_in_cpu) {
  size_t resident = 0;
  for (const auto& [begin, end] : layers) {
    if (end > max_in_cpu) break;
    resident = end;
  }
  return resident;
}

}  // namespace

ParamSwapper::ParamSwapper(const ParamSwapOptions& options,
                           std::vector<std::pair<size_t, size_t>> layers, size_t numel,
                           size_t esize, int rank, MemoryLedger& ledger)
    : options_(options),
      layers_(std::move(layers)),
      numel_(numel),
      esize_(esize),
      resident_numel_(resident_prefix(layers_, options.max_in_cpu)),
      ledger_(ledger),
      directory_(options.nvme_path, "params", rank),
      reader_(options.aio),
      writer_(options.aio) {
  size_t largest = 0;
  for (size_t l = 0; l < layers_.size(); ++l) {
    if (layers_[l].first < resident_numel_) continue;
    const size_t n = layers_[l].second - layers_[l].first;
    largest = std::max(largest, n);
    if (n > options.buffer_size) {
      throw Error(ErrorKind::Config,
                  "zero_optimization.offload_param.buffer_size is " +
                      std::to_string(options.buffer_size) + " elements, but layer " +
                      std::to_string(l) + "'s parameters on rank " + std::to_string(rank) +
                      " are " + std::to_string(n) +
                      " elements, and a swapped layer is read whole into one buffer. Raise "
                      "buffer_size to at least " +
                      std::to_string(n) + " (DeepSpeed's default is 1e8)");
    }
  }
  resident_.resize(resident_numel_ * esize_);
  ledger_.add(MemoryKind::Params, resident_.size());
  file_ = directory_.create_file("params.tensor.swp", swap::align_up(numel_ * esize_, kBlock));
  if (resident_numel_ == numel_) return;  // nothing on the disk: no buffers
  // A buffer holds the largest layer plus a block at either end (a layer starts and ends inside
  // disk blocks), and at least a few blocks for the writes.
  buffer_bytes_ = swap::align_up(std::max(largest, size_t{1}) * esize_, kBlock) + 2 * kBlock;
  const size_t count = std::max<size_t>(options.buffer_count, 1);
  for (size_t i = 0; i < count; ++i) {
    auto slot = std::make_unique<Slot>();
    slot->buffer = swap::AlignedBuffer(buffer_bytes_, options.pin_memory);
    ledger_.add(MemoryKind::Buffers, slot->buffer.bytes());
    slots_.push_back(std::move(slot));
  }
}

ParamSwapper::~ParamSwapper() {
  forget_reads();
  for (auto& slot : slots_) ledger_.remove(MemoryKind::Buffers, slot->buffer.bytes());
  ledger_.remove(MemoryKind::Params, resident_.size());
}

std::pair<size_t, size_t> ParamSwapper::window(size_t begin, size_t end) const {
  return {align_down(begin * esize_), swap::align_up(end * esize_, kBlock)};
}

size_t ParamSwapper::chunk_end(size_t lo, size_t end) const {
  // The window from lo's block may span the whole buffer.
  return std::min(end, (align_down(lo * esize_) + buffer_bytes_) / esize_);
}

void ParamSwapper::start_read(Slot& slot, int layer) {
  const auto [first, last] =
      window(layers_[static_cast<size_t>(layer)].first, layers_[static_cast<size_t>(layer)].second);
  slot.layer = layer;
  slot.window_begin = first;
  slot.read = reader_.submit({swap::IoKind::Read, file_, slot.buffer.data(), last - first, first});
}

ParamSwapper::Slot& ParamSwapper::slot_for(int layer) {
  for (auto& slot : slots_) {
    if (slot->layer == layer) return *slot;
  }
  // Not read ahead: take a free buffer, else the one whose layer is farthest from this one.
  Slot* pick = slots_.front().get();
  for (auto& slot : slots_) {
    if (slot->layer < 0) {
      pick = slot.get();
      break;
    }
    if (std::abs(slot->layer - layer) > std::abs(pick->layer - layer)) pick = slot.get();
  }
  if (pick->read.pending()) pick->read.wait(reader_.patience(buffer_bytes_));
  start_read(*pick, layer);
  return *pick;
}

void ParamSwapper::read_ahead(int layer) {
  const int step = layer >= last_layer_ ? 1 : -1;
  last_layer_ = layer;
  size_t free_slots = 0;
  for (auto& slot : slots_) free_slots += slot->layer < 0 ? 1 : 0;
  for (int l = layer + step; free_slots > 0 && l >= 0 && l < static_cast<int>(layers_.size());
       l += step) {
    const auto [begin, end] = layers_[static_cast<size_t>(l)];
    if (begin < resident_numel_ || begin == end) continue;
    bool held = false;
    for (auto& slot : slots_) held = held || slot->layer == l;
    if (held) continue;
    for (auto& slot : slots_) {
      if (slot->layer >= 0) continue;
      if (slot->read.pending()) slot->read.wait(reader_.patience(buffer_bytes_));
      start_read(*slot, l);
      --free_slots;
      break;
    }
  }
}

void ParamSwapper::read_layer(int layer, void* out) {
  const auto [begin, end] = layers_[static_cast<size_t>(layer)];
  std::lock_guard lock(mutex_);
  if (begin == end) return;
  if (end <= resident_numel_) {
    std::memcpy(out, resident_.data() + begin * esize_, (end - begin) * esize_);
    return;
  }
  Slot& slot = slot_for(layer);
  slot.read.wait(reader_.patience(buffer_bytes_));
  slot.read = swap::IoTicket();
  std::memcpy(out, slot.buffer.as<char>() + (begin * esize_ - slot.window_begin),
              (end - begin) * esize_);
  slot.layer = -1;
  ++disk_reads_;
  read_ahead(layer);
}

void ParamSwapper::forget_reads() {
  for (auto& slot : slots_) {
    try {
      if (slot->read.pending()) slot->read.wait(reader_.patience(buffer_bytes_));
    } catch (...) {
      // the read was ahead of need: a failure shows again when its layer is read
    }
    slot->read = swap::IoTicket();
    slot->layer = -1;
  }
}

void ParamSwapper::write(size_t begin, size_t count, const void* src) {
  std::lock_guard lock(mutex_);
  const auto* from = static_cast<const uint8_t*>(src);
  const size_t end = begin + count;
  if (begin < resident_numel_) {
    const size_t n = std::min(end, resident_numel_) - begin;
    std::memcpy(resident_.data() + begin * esize_, from, n * esize_);
  }
  if (end <= resident_numel_) return;
  forget_reads();  // what the buffers hold (or are reading) may be overwritten now
  Slot& slot = *slots_.front();
  // Chunks as large as the buffer; a disk block the chunk covers only in part is read first, so
  // that its neighbours' bytes go back unchanged.
  for (size_t lo = std::max(begin, resident_numel_); lo < end;) {
    const size_t hi = chunk_end(lo, end);
    const auto [first, last] = window(lo, hi);
    char* data = slot.buffer.as<char>();
    const bool head = first < lo * esize_;
    if (head) reader_.read(file_, data, kBlock, first);
    if (last > hi * esize_ && !(head && last - kBlock == first))
      reader_.read(file_, data + (last - first - kBlock), kBlock, last - kBlock);
    std::memcpy(data + (lo * esize_ - first), from + (lo - begin) * esize_, (hi - lo) * esize_);
    writer_.write(file_, data, last - first, first);
    lo = hi;
  }
}

void ParamSwapper::read(size_t begin, size_t count, void* out) {
  std::lock_guard lock(mutex_);
  auto* to = static_cast<uint8_t*>(out);
  const size_t end = begin + count;
  if (begin < resident_numel_) {
    const size_t n = std::min(end, resident_numel_) - begin;
    std::memcpy(to, resident_.data() + begin * esize_, n * esize_);
  }
  if (end <= resident_numel_) return;
  forget_reads();
  Slot& slot = *slots_.front();
  for (size_t lo = std::max(begin, resident_numel_); lo < end;) {
    const size_t hi = chunk_end(lo, end);
    const auto [first, last] = window(lo, hi);
    reader_.read(file_, slot.buffer.data(), last - first, first);
    std::memcpy(to + (lo - begin) * esize_, slot.buffer.as<char>() + (lo * esize_ - first),
                (hi - lo) * esize_);
    lo = hi;
  }
}

}  // namespace dsx::zero
