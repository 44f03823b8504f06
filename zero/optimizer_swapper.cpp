// Sub-group by sub-group swapping of the optimizer state (see optimizer_swapper.h).
#include "zero/optimizer_swapper.h"

#include <algorithm>
#include <cstring>

#include "dsx/error.h"

namespace dsx::zero {

struct OptimizerSwapper::Slot {
  swap::AlignedBuffer buffer;  // tensors x group_bytes
  std::vector<swap::IoTicket> reads;
  std::vector<swap::IoTicket> writes;
  size_t group = 0;
};

namespace {

constexpr size_t kElementsPerAlignment = swap::kDirectAlignment / sizeof(float);

void wait_each(std::vector<swap::IoTicket>& tickets, std::chrono::milliseconds timeout) {
  for (auto& t : tickets) t.wait(timeout);
}

}  // namespace

OptimizerSwapper::OptimizerSwapper(const OptimizerSwapOptions& options,
                                   std::vector<std::string> state_names, size_t numel, int rank,
                                   MemoryLedger& ledger)
    : options_(options),
      names_(std::move(state_names)),
      numel_(numel),
      // Sub-groups start on aligned file offsets: their size is a whole number of alignments.
      group_numel_(
          swap::align_up(std::clamp<size_t>(options.sub_group_size, 1, std::max<size_t>(numel, 1)),
                         kElementsPerAlignment)),
      group_bytes_(group_numel_ * sizeof(float)),
      groups_((numel + group_numel_ - 1) / group_numel_),
      ledger_(ledger),
      directory_(options.nvme_path, "optimizer", rank),
      reader_(options.aio),
      writer_(options.aio) {
  for (const std::string& name : names_) {
    files_.push_back(directory_.create_file(name + ".tensor.swp", groups_ * group_bytes_));
  }
  const size_t tensors = std::max<size_t>(names_.size(), 1);
  const size_t fit = std::clamp<size_t>(options.buffer_count / tensors, 1, 3);
  const size_t slots = std::min(fit, std::max<size_t>(groups_, 1));
  for (size_t i = 0; i < slots; ++i) {
    auto slot = std::make_unique<Slot>();
    slot->buffer = swap::AlignedBuffer(names_.size() * group_bytes_, options.pin_memory);
    slot->reads.resize(names_.size());
    slot->writes.resize(names_.size());
    ledger_.add(MemoryKind::Buffers, slot->buffer.bytes());
    slots_.push_back(std::move(slot));
  }
}

OptimizerSwapper::~OptimizerSwapper() {
  wait_all();
  for (auto& slot : slots_) ledger_.remove(MemoryKind::Buffers, slot->buffer.bytes());
}

size_t OptimizerSwapper::bytes_of(size_t g) const {
  const size_t count = std::min(group_numel_, numel_ - g * group_numel_);
  return swap::align_up(count * sizeof(float), swap::kDirectAlignment);
}

OptimizerSwapper::Group OptimizerSwapper::group_in(size_t g, Slot& slot) {
  Group group{g * group_numel_, std::min(group_numel_, numel_ - g * group_numel_), {}};
  for (size_t t = 0; t < names_.size(); ++t) {
    group.state.push_back(reinterpret_cast<float*>(slot.buffer.as<char>() + t * group_bytes_));
  }
  return group;
}

void OptimizerSwapper::wait_writes(Slot& slot) {
  wait_each(slot.writes, writer_.patience(group_bytes_));
}

void OptimizerSwapper::start_read(size_t g) {
  Slot& slot = *slots_[g % slots_.size()];
  wait_writes(slot);  // the buffer's previous sub-group must be on the disk first
  slot.group = g;
  for (size_t t = 0; t < names_.size(); ++t) {
    slot.reads[t] =
        reader_.submit({swap::IoKind::Read, files_[t], slot.buffer.as<char>() + t * group_bytes_,
                        bytes_of(g), offset_of(g)});
  }
}

void OptimizerSwapper::start_write(size_t g) {
  Slot& slot = *slots_[g % slots_.size()];
  for (size_t t = 0; t < names_.size(); ++t) {
    slot.writes[t] =
        writer_.submit({swap::IoKind::Write, files_[t], slot.buffer.as<char>() + t * group_bytes_,
                        bytes_of(g), offset_of(g)});
  }
}

void OptimizerSwapper::wait_all() {
  for (auto& slot : slots_) {
    for (auto* tickets : {&slot->reads, &slot->writes}) {
      for (auto& t : *tickets) {
        try {
          t.wait(reader_.patience(group_bytes_));
        } catch (...) {
          // the first error is already on its way up
        }
      }
    }
  }
}

void OptimizerSwapper::for_each_group(const std::function<void(const Group&)>& step) {
  // Overlap needs a second sub-group in memory; with one, every transfer is waited at once.
  const bool ahead = options_.pipeline_read && slots_.size() > 1;
  const bool behind = options_.pipeline_write && slots_.size() > 1;
  try {
    if (groups_ > 0) start_read(0);
    for (size_t g = 0; g < groups_; ++g) {
      Slot& slot = *slots_[g % slots_.size()];
      wait_each(slot.reads, reader_.patience(group_bytes_));
      if (ahead && g + 1 < groups_) start_read(g + 1);
      step(group_in(g, slot));
      start_write(g);
      if (!behind) wait_writes(slot);
      if (!ahead && g + 1 < groups_) start_read(g + 1);
    }
    for (auto& slot : slots_) wait_writes(*slot);
  } catch (...) {
    wait_all();  // no transfer may outlive the buffers it uses
    throw;
  }
}

void OptimizerSwapper::read_state(size_t tensor, float* out) {
  Slot& slot = *slots_.front();
  for (size_t g = 0; g < groups_; ++g) {
    reader_.read(files_[tensor], slot.buffer.data(), bytes_of(g), offset_of(g));
    const Group group = group_in(g, slot);
    std::memcpy(out + group.begin, slot.buffer.data(), group.count * sizeof(float));
  }
}

void OptimizerSwapper::write_state(size_t tensor, const float* values) {
  Slot& slot = *slots_.front();
  for (size_t g = 0; g < groups_; ++g) {
    const Group group = group_in(g, slot);
    std::memset(slot.buffer.data(), 0, bytes_of(g));  // the alignment padding past the last element
    std::memcpy(slot.buffer.data(), values + group.begin, group.count * sizeof(float));
    writer_.write(files_[tensor], slot.buffer.data(), bytes_of(g), offset_of(g));
  }
}

}  // namespace dsx::zero
