// One libfabric RDM endpoint with tagged messaging: fabric, domain, completion queue, address
// vector and endpoint, opened from a provider name ("shm", "tcp", "efa", ... or "" to let
// FI_PROVIDER decide). Peers are inserted in rank order, so a peer's fi_addr is its world rank.
// Only one thread may use an Endpoint (FI_THREAD_DOMAIN): the communicator's worker thread.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/ofi/mr_cache.h"

namespace dsx::comm::ofi {

struct EndpointTraits {
  std::string provider;      // as libfabric names it: "shm", "tcp;ofi_rxm", "efa"
  size_t inject_size = 0;
  size_t max_msg_size = 0;
  size_t tx_size = 0;        // transmit queue depth: how many sends may be outstanding
  bool needs_mr_desc = false;
};

// A completion: the context of the finished operation, and an error text when it failed.
struct Completion {
  void* context;
  int error;  // 0, or a positive FI_* error number
  std::string error_text;
};

class Endpoint {
 public:
  // `force_registration`: register every buffer even where the provider does not need it
  // (tests use it to exercise the registration cache on tcp).
  Endpoint(const std::string& provider, bool force_registration = false);
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  std::string address() const;  // opaque bytes to publish through the store
  void insert_peers(const std::vector<std::string>& addresses);

  // Post a tagged send / receive. Returns 0, or -FI_EAGAIN when the provider has no room now
  // (poll and retry). Other failures throw Comm naming the peer.
  ssize_t post_send(const void* buf, size_t len, int peer, uint64_t tag, void* context);
  ssize_t post_recv(void* buf, size_t len, int peer, uint64_t tag, void* context);

  // Reads up to out.size() completions (also drives progress: with FI_PROGRESS_MANUAL nothing
  // moves unless someone polls). Returns how many were written.
  size_t poll(std::vector<Completion>& out);

  const EndpointTraits& traits() const { return traits_; }
  MrCache& registrations() { return *mr_; }

 private:
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
  fid_ep* ep_ = nullptr;
  std::unique_ptr<MrCache> mr_;
  EndpointTraits traits_;
  std::vector<fi_addr_t> peers_;
};

}  // namespace dsx::comm::ofi
