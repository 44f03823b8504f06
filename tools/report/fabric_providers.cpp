// The hints are the ones the ofi backend asks for (ref: comm.md 1.2): FI_EP_RDM with FI_MSG |
// FI_TAGGED, every mr_mode bit we can cope with. FI_PROVIDER still filters, so a provider it
// excludes shows as not usable, as it would be for a training run.
#include "tools/report/fabric_providers.h"

#include <rdma/fabric.h>

#include <cstring>

namespace dsx::report {

std::string fabric_header_version() {
  return std::to_string(FI_MAJOR_VERSION) + "." + std::to_string(FI_MINOR_VERSION);
}

namespace {

FabricProvider probe(const char* name) {
  FabricProvider p;
  p.name = name;
  fi_info* hints = fi_allocinfo();
  if (!hints) {
    p.detail = "fi_allocinfo failed";
    return p;
  }
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_MSG | FI_TAGGED;
  hints->mode = FI_CONTEXT;
  hints->domain_attr->mr_mode =
      FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  hints->fabric_attr->prov_name = strdup(name);
  fi_info* info = nullptr;
  // API 1.18 first (providers may then use device memory themselves); older libraries refuse it.
  int rc = fi_getinfo(FI_VERSION(1, 18), nullptr, nullptr, 0, hints, &info);
  if (rc == -FI_ENOSYS)
    rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), nullptr, nullptr, 0, hints,
                    &info);
  if (rc == 0 && info) {
    p.usable = true;
    p.provider = info->fabric_attr->prov_name ? info->fabric_attr->prov_name : name;
    p.detail = info->domain_attr->name ? info->domain_attr->name : "";
    fi_freeinfo(info);
  } else {
    p.detail = std::string(fi_strerror(-rc)) + " (" + std::to_string(rc) + ")";
  }
  fi_freeinfo(hints);
  return p;
}

}  // namespace

FabricInfo probe_fabric_providers() {
  FabricInfo f;
  uint32_t v = fi_version();
  f.loaded = true;
  f.major = static_cast<int>(FI_MAJOR(v));
  f.minor = static_cast<int>(FI_MINOR(v));
  f.version = std::to_string(f.major) + "." + std::to_string(f.minor);
  for (const char* name : {"efa", "verbs", "tcp", "shm", "sockets", "udp"})
    f.providers.push_back(probe(name));
  return f;
}

}  // namespace dsx::report
