// Opening and driving a libfabric RDM endpoint (see endpoint.h). The call sequence and the hints
// follow what works on efa, tcp;ofi_rxm, shm and sockets: ask for every mr_mode bit we can cope
// with and honour what the provider keeps.
#include "comm/ofi/endpoint.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "dsx/error.h"

namespace dsx::comm::ofi {

namespace {

std::string fi_error(const char* call, int rc) {
  return std::string(call) + " failed: " + fi_strerror(rc < 0 ? -rc : rc) + " (" + std::to_string(rc) + ")";
}

void check(int rc, const char* call, const std::string& provider) {
  if (rc != 0) {
    throw Error(ErrorKind::Comm, "ofi (provider " + provider + "): " + fi_error(call, rc));
  }
}

fi_info* make_hints(const std::string& provider) {
  fi_info* hints = fi_allocinfo();
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_MSG | FI_TAGGED | FI_DIRECTED_RECV;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  if (!provider.empty()) hints->fabric_attr->prov_name = strdup(provider.c_str());
  return hints;
}

// fi_getinfo with the newest API version this libfabric accepts (1.18+ lets providers use HMEM;
// Debian's 1.17 answers -FI_ENOSYS to newer versions).
int get_info(fi_info* hints, fi_info** info) {
  int rc = -FI_ENOSYS;
  for (int minor = 18; minor >= 17 && rc == -FI_ENOSYS; --minor) {
    rc = fi_getinfo(FI_VERSION(1, minor), nullptr, nullptr, 0, hints, info);
  }
  return rc;
}

// libfabric's shm names its region in /dev/shm "<pid>:<domain>:<endpoint>" and leaves it there
// when the process is killed. A later process that is given the same pid then fails to open its
// endpoint (EBUSY, or SIGBUS on a truncated region). No living process of this pid namespace can
// own a region named after our pid, so such leftovers are removed before we open our first
// (later endpoints of this process must not remove the regions of earlier ones still open).
void remove_stale_shm_regions() {
  static std::atomic<bool> done{false};
  if (done.exchange(true)) return;
  const std::string mine = std::to_string(getpid()) + ":";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
    if (entry.path().filename().string().rfind(mine, 0) == 0) std::filesystem::remove(entry.path(), ec);
  }
}

// ofi_rxm (tcp) sends messages up to its eager limit in one go and larger ones by segments or a
// rendezvous; its 16 KiB default puts the 64 KiB exchanges of recursive-doubling allreduce
// (CommOptions::small_bytes) on the slower paths: measured on loopback, 64-128 KiB allreduces
// ran 1.7-2x faster with 64 KiB. Read once, when libfabric loads its providers (the first
// fi_getinfo), and only where the user has not set them.
void set_provider_defaults() {
  setenv("FI_OFI_RXM_BUFFER_SIZE", "65536", 0);
  setenv("FI_OFI_RXM_EAGER_LIMIT", "65536", 0);
}

}  // namespace

Endpoint::Endpoint(const std::string& provider, bool force_registration) {
  set_provider_defaults();
  fi_info* hints = make_hints(provider);
  int rc = get_info(hints, &info_);
  fi_freeinfo(hints);
  if (rc == -FI_ENODATA) {
    const char* env = std::getenv("FI_PROVIDER");
    std::string wanted = provider.empty() ? (env ? std::string("FI_PROVIDER=") + env : "any provider")
                                          : "provider '" + provider + "'";
    std::string filter = env && !provider.empty() ? std::string(" (FI_PROVIDER=") + env + " also filters)" : "";
    throw Error(ErrorKind::Comm, "ofi: " + wanted + filter +
                                     " offers no reliable tagged endpoint (FI_EP_RDM) on this host - run `fi_info -l` "
                                     "to see the providers that exist here; dsx uses shm, tcp, efa or sockets");
  }
  check(rc, "fi_getinfo", provider.empty() ? "default" : provider);
  traits_.provider = info_->fabric_attr->prov_name;
  traits_.inject_size = info_->tx_attr->inject_size;
  traits_.max_msg_size = info_->ep_attr->max_msg_size;
  traits_.tx_size = info_->tx_attr->size;
  traits_.needs_mr_desc = (info_->domain_attr->mr_mode & FI_MR_LOCAL) != 0;

  const std::string& p = traits_.provider;
  if (p.rfind("shm", 0) == 0) remove_stale_shm_regions();
  check(fi_fabric(info_->fabric_attr, &fabric_, nullptr), "fi_fabric", p);
  check(fi_domain(fabric_, info_, &domain_, nullptr), "fi_domain", p);
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_CONTEXT;
  cq_attr.wait_obj = FI_WAIT_NONE;
  cq_attr.size = info_->tx_attr->size + info_->rx_attr->size;
  check(fi_cq_open(domain_, &cq_attr, &cq_, nullptr), "fi_cq_open", p);
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  check(fi_av_open(domain_, &av_attr, &av_, nullptr), "fi_av_open", p);
  check(fi_endpoint(domain_, info_, &ep_, nullptr), "fi_endpoint", p);
  check(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)", p);
  check(fi_ep_bind(ep_, &av_->fid, 0), "fi_ep_bind(av)", p);
  check(fi_enable(ep_), "fi_enable", p);
  bool bind = (info_->domain_attr->mr_mode & FI_MR_ENDPOINT) != 0;
  mr_ = std::make_unique<MrCache>(domain_, ep_, traits_.needs_mr_desc || force_registration, bind);
}

Endpoint::~Endpoint() {
  mr_.reset();
  if (ep_) fi_close(&ep_->fid);
  if (av_) fi_close(&av_->fid);
  if (cq_) fi_close(&cq_->fid);
  if (domain_) fi_close(&domain_->fid);
  if (fabric_) fi_close(&fabric_->fid);
  if (info_) fi_freeinfo(info_);
}

std::string Endpoint::address() const {
  std::string name(64, '\0');
  size_t len = name.size();
  int rc = fi_getname(&ep_->fid, name.data(), &len);
  if (rc == -FI_ETOOSMALL) {
    name.resize(len);
    rc = fi_getname(&ep_->fid, name.data(), &len);
  }
  check(rc, "fi_getname", traits_.provider);
  name.resize(len);
  return name;
}

void Endpoint::insert_peers(const std::vector<std::string>& addresses) {
  // One address at a time: a provider's addresses need not all have one length (shm names grow
  // with the pid's digits), and inserting a packed array would read them at a fixed stride.
  peers_.assign(addresses.size(), FI_ADDR_NOTAVAIL);
  for (size_t i = 0; i < addresses.size(); ++i) {
    const int n = fi_av_insert(av_, addresses[i].data(), 1, &peers_[i], 0, nullptr);
    if (n != 1) {
      throw Error(ErrorKind::Comm, "ofi (provider " + traits_.provider + "): fi_av_insert refused the address of rank " +
                                       std::to_string(i) + " (" + std::to_string(addresses[i].size()) +
                                       " bytes); every rank must use the same provider - check FI_PROVIDER on "
                                       "all hosts");
    }
  }
}

ssize_t Endpoint::post_send(const void* buf, size_t len, int peer, uint64_t tag, void* context) {
  void* desc = mr_->desc(buf, len);
  ssize_t rc = fi_tsend(ep_, buf, len, desc, peers_[static_cast<size_t>(peer)], tag, context);
  if (rc != 0 && rc != -FI_EAGAIN) {
    throw Error(ErrorKind::Comm, "ofi (provider " + traits_.provider + "): sending " + std::to_string(len) +
                                     " bytes to rank " + std::to_string(peer) + ": " + fi_error("fi_tsend", static_cast<int>(rc)));
  }
  return rc;
}

ssize_t Endpoint::post_recv(void* buf, size_t len, int peer, uint64_t tag, void* context) {
  void* desc = mr_->desc(buf, len);
  ssize_t rc = fi_trecv(ep_, buf, len, desc, peers_[static_cast<size_t>(peer)], tag, 0, context);
  if (rc != 0 && rc != -FI_EAGAIN) {
    throw Error(ErrorKind::Comm, "ofi (provider " + traits_.provider + "): receiving " + std::to_string(len) +
                                     " bytes from rank " + std::to_string(peer) + ": " + fi_error("fi_trecv", static_cast<int>(rc)));
  }
  return rc;
}

size_t Endpoint::poll(std::vector<Completion>& out) {
  fi_cq_entry entries[64];
  ssize_t n = fi_cq_read(cq_, entries, std::min<size_t>(64, out.size()));
  if (n > 0) {
    for (ssize_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = Completion{entries[i].op_context, 0, {}};
    return static_cast<size_t>(n);
  }
  if (n == -FI_EAGAIN) return 0;
  if (n == -FI_EAVAIL) {
    fi_cq_err_entry err{};
    if (fi_cq_readerr(cq_, &err, 0) != 1) return 0;
    char text[256] = {};
    fi_cq_strerror(cq_, err.prov_errno, err.err_data, text, sizeof(text));
    std::string detail = std::string(fi_strerror(err.err)) + (text[0] ? std::string(": ") + text : "");
    if (err.err == FI_ETRUNC) detail += " (" + std::to_string(err.olen) + " bytes too many: ranks disagree on a size)";
    out[0] = Completion{err.op_context, err.err, detail};
    return 1;
  }
  throw Error(ErrorKind::Comm, "ofi (provider " + traits_.provider + "): " + fi_error("fi_cq_read", static_cast<int>(n)));
}

}  // namespace dsx::comm::ofi
