// Registration cache of one libfabric domain (see mr_cache.h).
#include "comm/ofi/mr_cache.h"

#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <unistd.h>

#include <string>

#include "dsx/error.h"

namespace dsx::comm::ofi {

MrCache::MrCache(fid_domain* domain, fid_ep* endpoint, bool required, bool bind_to_endpoint)
    : domain_(domain), endpoint_(endpoint), required_(required), bind_(bind_to_endpoint) {}

MrCache::~MrCache() {
  for (auto& [start, region] : regions_) fi_close(&region.mr->fid);
  for (fid_mr* mr : retired_) fi_close(&mr->fid);
}

void* MrCache::desc(const void* buf, size_t len) {
  if (!required_) return nullptr;
  auto begin = reinterpret_cast<uintptr_t>(buf);
  uintptr_t end = begin + len;
  auto it = regions_.upper_bound(begin);
  if (it != regions_.begin()) {
    --it;
    if (it->first <= begin && end <= it->second.end) {
      ++hits_;
      return fi_mr_desc(it->second.mr);
    }
  }
  // Register whole pages so that neighbouring slices of one buffer share the registration.
  auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t first = begin & ~(page - 1);
  uintptr_t last = (end + page - 1) & ~(page - 1);
  fid_mr* mr = nullptr;
  int rc = fi_mr_reg(domain_, reinterpret_cast<void*>(first), last - first, FI_SEND | FI_RECV, 0, next_key_++, 0,
                     &mr, nullptr);
  if (rc == 0 && bind_) {
    rc = fi_mr_bind(mr, &endpoint_->fid, 0);
    if (rc == 0) rc = fi_mr_enable(mr);
  }
  if (rc != 0) {
    if (mr) fi_close(&mr->fid);
    throw Error(ErrorKind::Comm, "ofi: cannot register " + std::to_string(last - first) +
                                     " bytes of memory with the fabric: " + fi_strerror(-rc) +
                                     " - check `ulimit -l` (locked memory) on this host");
  }
  // A region with the same start (a shorter one) may still be in use by a posted transfer: keep
  // it alive until the endpoint closes, but look up the larger one from now on.
  auto same = regions_.find(first);
  if (same != regions_.end()) retired_.push_back(same->second.mr);
  regions_[first] = Region{last, mr};
  ++registrations_;
  return fi_mr_desc(mr);
}

void MrCache::forget(const void* buf) {
  auto begin = reinterpret_cast<uintptr_t>(buf);
  auto it = regions_.upper_bound(begin);
  if (it == regions_.begin()) return;
  --it;
  if (begin < it->second.end) {
    fi_close(&it->second.mr->fid);
    regions_.erase(it);
  }
}

}  // namespace dsx::comm::ofi
