// Memory registrations of one libfabric domain, made once and reused. Providers that set
// FI_MR_LOCAL need a registered descriptor for every buffer a transfer touches; registering per
// message costs more than small messages themselves, so regions stay registered until the
// endpoint closes. Buffers are expected to live as long as the communicator (ZeRO's flat
// buffers, the communicator's scratch); call forget() before freeing one that does not.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace dsx::comm::ofi {

class MrCache {
 public:
  // `required`: the provider needs descriptors (FI_MR_LOCAL); otherwise desc() returns nullptr
  // and registers nothing. `endpoint` is bound to each region when the provider sets FI_MR_ENDPOINT.
  MrCache(fid_domain* domain, fid_ep* endpoint, bool required, bool bind_to_endpoint);
  ~MrCache();
  MrCache(const MrCache&) = delete;
  MrCache& operator=(const MrCache&) = delete;

  // The descriptor to pass with a transfer of [buf, buf + len). Throws Comm if registration fails.
  void* desc(const void* buf, size_t len);
  void forget(const void* buf);

  size_t registrations() const { return registrations_; }
  size_t hits() const { return hits_; }

 private:
  struct Region {
    uintptr_t end;
    fid_mr* mr;
  };
  fid_domain* domain_;
  fid_ep* endpoint_;
  bool required_;
  bool bind_;
  uint64_t next_key_ = 1;  // providers without FI_MR_PROV_KEY refuse a key used twice (-FI_ENOKEY)
  std::map<uintptr_t, Region> regions_;  // by start address
  std::vector<fid_mr*> retired_;
  size_t registrations_ = 0;
  size_t hits_ = 0;
};

}  // namespace dsx::comm::ofi
