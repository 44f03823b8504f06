// Binds the algorithms' Transport to one operation of one group on the ofi progress engine:
// group ranks become world ranks (fi_addr), message indices become 64-bit tags that no other
// operation or group can match, and waits carry the operation's deadline and description.
//
// Tag: [11 bits group id][1 bit point-to-point][20 bits operation number][16 bits sender's
// group rank][16 bits message index]. The operation number wraps after 2^20 operations, long
// after any message of an old operation has been matched (operations complete in order).
#pragma once

#include <cstdint>
#include <vector>

#include "comm/algorithms/transport.h"
#include "comm/ofi/host_segments.h"
#include "comm/ofi/progress_engine.h"

namespace dsx::comm::ofi {

inline constexpr uint32_t kMaxGroups = 1u << 11;

inline uint64_t make_tag(uint32_t group_id, bool p2p, uint32_t op_number, int sender, uint32_t index) {
  return (uint64_t{group_id & 0x7ffu} << 53) | (uint64_t{p2p} << 52) | (uint64_t{op_number & 0xfffffu} << 32) |
         (uint64_t{static_cast<uint32_t>(sender) & 0xffffu} << 16) | (index & 0xffffu);
}

class OfiTransport final : public algorithms::Transport {
 public:
  OfiTransport(ProgressEngine& engine, const std::vector<int>& members, int rank, uint32_t group_id, bool p2p,
               uint32_t op_number, OpInfo op)
      : engine_(engine), members_(members), rank_(rank), group_id_(group_id), p2p_(p2p), op_number_(op_number),
        op_(std::move(op)) {}

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  RequestId send(int peer, const void* data, size_t bytes, uint32_t index) override {
    check_index(index);
    return engine_.post_send(members_[static_cast<size_t>(peer)], data, bytes,
                             make_tag(group_id_, p2p_, op_number_, rank_, index), index, op_);
  }
  RequestId recv(int peer, void* data, size_t bytes, uint32_t index) override {
    check_index(index);
    return engine_.post_recv(members_[static_cast<size_t>(peer)], data, bytes,
                             make_tag(group_id_, p2p_, op_number_, peer, index), index, op_);
  }
  void wait(RequestId request) override { engine_.wait(request, op_); }
  void* scratch(size_t bytes) override { return engine_.scratch(bytes); }
  // For the shared-memory path: the same deadline and dead-peer checks as the fabric's waits.
  HostSegments::KeepAlive keep_alive() {
    return [this](int peer, const char* what, bool exited) {
      engine_.keep_alive(op_, members_[static_cast<size_t>(peer)], what, exited, next_check_);
    };
  }

 private:
  void check_index(uint32_t index) const {
    if (index >= algorithms::kMaxMessageIndex) {
      throw Error(ErrorKind::Internal, op_.description + ": message index " + std::to_string(index) + " overflows the tag");
    }
  }
  ProgressEngine& engine_;
  const std::vector<int>& members_;
  int rank_;
  uint32_t group_id_;
  bool p2p_;
  uint32_t op_number_;
  OpInfo op_;
  Clock::time_point next_check_{};  // set by the first keep_alive
};

}  // namespace dsx::comm::ofi
