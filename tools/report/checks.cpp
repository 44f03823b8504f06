// One function per concern; each appends findings. Order: what stops a job (errors) is found
// by the same pass as what slows it (warnings); the printer sorts by severity.
#include "tools/report/checks.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "dsx/join.h"
#include "tools/report/cuda_libraries.h"
#include "tools/report/variable_catalog.h"

namespace dsx::report {

const char* to_string(Severity s) {
  switch (s) {
    case Severity::Info: return "info";
    case Severity::Warning: return "warning";
    case Severity::Error: return "error";
  }
  return "?";
}

namespace {

using Findings = std::vector<Finding>;

const std::string* variable(const Environment& env, const std::string& name) {
  for (const auto& [n, v] : env.variables) {
    if (n == name) return &v;
  }
  return nullptr;
}

std::string joined(const std::vector<std::string>& items) {
  return items.empty() ? "none" : join(items, ", ");
}

bool has_efa(const Environment& env) {
  for (const auto& d : env.rdma_devices) {
    if (d.rfind("rdmap", 0) == 0 || d.rfind("efa", 0) == 0) return true;
  }
  for (const auto& p : env.fabric.providers) {
    if (p.name == "efa" && p.usable) return true;
  }
  return false;
}

bool has_rdma(const Environment& env) {
  if (!env.rdma_devices.empty()) return true;
  for (const auto& p : env.fabric.providers) {
    if ((p.name == "efa" || p.name == "verbs") && p.usable) return true;
  }
  return false;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, sep);) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

void check_gpus(const Environment& env, Findings& out) {
  const auto& topo = env.gpus;
  if (topo.gpus.empty()) {
    out.push_back(
        {Severity::Info, "no-gpu", "no GPU found: " + topo.unavailable_reason,
         "fine for CPU training (the ofi backend); for GPU training install the NVIDIA driver and "
         "check that nvidia-smi lists the GPUs"});
    return;
  }
  std::vector<std::string> slow_pairs;
  for (size_t i = 0; i < topo.links.size(); ++i) {
    for (size_t j = i + 1; j < topo.links[i].size(); ++j) {
      if (topo.links[i][j] != GpuLink::NvLink) {
        slow_pairs.push_back("GPU" + std::to_string(i) + "-GPU" + std::to_string(j) + " " +
                             to_string(topo.links[i][j]));
      }
    }
  }
  if (!slow_pairs.empty()) {
    if (slow_pairs.size() > 6) {
      slow_pairs.resize(6);
      slow_pairs.push_back("...");
    }
    out.push_back(
        {Severity::Warning, "no-nvlink", "GPUs not connected by NVLink: " + joined(slow_pairs),
         "intra-node collectives go over PCIe or through the CPU (tens of GB/s instead of "
         "hundreds); "
         "expect ZeRO-3 and large allreduces to be slower, prefer fewer GPUs per process group or "
         "gradient accumulation to communicate less often"});
  }
  for (const auto& g : topo.gpus) {
    if (g.name != topo.gpus.front().name) {
      out.push_back(
          {Severity::Warning, "mixed-gpus",
           "different GPU models on one node: " + topo.gpus.front().name + " and " + g.name,
           "every rank waits for the slowest GPU and the smallest memory sets the micro-batch; "
           "use CUDA_VISIBLE_DEVICES to pick identical GPUs"});
      break;
    }
  }
  if (const auto* visible = variable(env, "CUDA_VISIBLE_DEVICES")) {
    if (visible->empty() || *visible == "-1") {
      out.push_back({Severity::Warning, "cuda-visible-devices",
                     "CUDA_VISIBLE_DEVICES=\"" + *visible + "\" hides every GPU from CUDA",
                     "unset it, or list the GPUs this process should use"});
      return;
    }
    for (const auto& id : split(*visible, ',')) {
      // Indices only (UUIDs such as GPU-8f3... are left alone); short, so stoul cannot overflow.
      bool numeric = id.size() <= 6 && std::all_of(id.begin(), id.end(),
                                                   [](unsigned char c) { return std::isdigit(c); });
      if (numeric && std::stoul(id) >= topo.gpus.size()) {
        out.push_back({Severity::Error, "cuda-visible-devices",
                       "CUDA_VISIBLE_DEVICES=" + *visible + " names GPU " + id +
                           " but this host has " + std::to_string(topo.gpus.size()),
                       "CUDA stops reading the list at the first bad entry; fix or unset "
                       "CUDA_VISIBLE_DEVICES"});
        break;
      }
    }
  }
}

int cudnn_major(int code) { return code >= 90000 ? code / 10000 : code / 1000; }

// A CUDA build against the libraries that load: a different CUDA or cuDNN major fails at the
// first call; an older NCCL than the headers may lack functions dsx calls.
void check_build_versions(const Environment& env, Findings& out) {
  const auto& b = env.build;
  const auto& c = env.cuda;
  if (b.cudart_code && c.runtime.version_code &&
      b.cudart_code / 1000 != c.runtime.version_code / 1000) {
    out.push_back({Severity::Error, "cuda-differs-from-build",
                   "dsx was built with CUDA " + cuda_version_text(b.cudart_code) +
                       " but CUDA runtime " + c.runtime.version + " is loaded (" + c.runtime.path +
                       ")",
                   "put the CUDA " + std::to_string(b.cudart_code / 1000) +
                       " libraries first on LD_LIBRARY_PATH, or rebuild dsx against this toolkit"});
  }
  if (b.nccl_code && c.nccl.version_code && c.nccl.version_code < b.nccl_code) {
    out.push_back({Severity::Warning, "nccl-older-than-build",
                   "NCCL " + c.nccl.version + " is loaded but dsx was built against NCCL " +
                       nccl_version_text(b.nccl_code),
                   "load the NCCL dsx was built with (LD_LIBRARY_PATH) or rebuild; older NCCLs "
                   "lack newer calls"});
  }
  if (b.cudnn_code && c.cudnn.version_code &&
      cudnn_major(b.cudnn_code) != cudnn_major(c.cudnn.version_code)) {
    out.push_back({Severity::Error, "cudnn-differs-from-build",
                   "dsx was built against cuDNN " + cudnn_version_text(b.cudnn_code) +
                       " but cuDNN " + c.cudnn.version + " is loaded",
                   "load cuDNN " + std::to_string(cudnn_major(b.cudnn_code)) +
                       " (LD_LIBRARY_PATH) or rebuild"});
  }
}

// The NVIDIA driver a CUDA major release needs at least: within a major release a newer runtime
// runs on an older driver of the same major (minor-version compatibility), across majors not.
const char* minimum_driver(int cuda_major) {
  switch (cuda_major) {
    case 11: return "450.80.02";
    case 12: return "525.60.13";
    case 13: return "580";
    default: return "";
  }
}

void check_driver(const Environment& env, Findings& out) {
  const auto& c = env.cuda;
  if (!c.runtime.found || !c.driver.found || c.driver.version_code <= 0 ||
      c.runtime.version_code <= c.driver.version_code) {
    return;
  }
  const int runtime_major = c.runtime.version_code / 1000;
  const std::string driver =
      "CUDA " + c.driver.version +
      (env.gpus.driver_version.empty() ? "" : " (driver " + env.gpus.driver_version + ")");
  if (runtime_major > c.driver.version_code / 1000) {
    const std::string needed = minimum_driver(runtime_major);
    out.push_back({Severity::Error, "driver-too-old",
                   "CUDA runtime " + c.runtime.version + " needs a driver for CUDA " +
                       std::to_string(runtime_major) +
                       (needed.empty() ? "" : " (>= " + needed + ")") + "; this one supports " +
                       driver,
                   "every CUDA call fails with cudaErrorInsufficientDriver: install an NVIDIA "
                   "driver for CUDA " + std::to_string(runtime_major) +
                       ", or install the dsx build for CUDA " +
                       std::to_string(c.driver.version_code / 1000)});
    return;
  }
  out.push_back({Severity::Info, "driver-older-minor",
                 "CUDA runtime " + c.runtime.version + " on a driver for " + driver +
                     ": runs through CUDA's minor-version compatibility",
                 "fine for dsx's kernels (compiled for the GPUs it targets); only PTX compiled "
                 "at run time for a newer GPU would need a newer driver"});
}

void check_versions(const Environment& env, Findings& out) {
  const auto& c = env.cuda;
  check_driver(env, out);
  const int runtime_major = c.runtime.version_code / 1000;
  if (c.runtime.found && c.cudnn.found && c.cudnn_cudart_code > 0 &&
      c.cudnn_cudart_code / 1000 != runtime_major) {
    out.push_back({Severity::Warning, "cudnn-cuda-mismatch",
                   "cuDNN " + c.cudnn.version + " was built for CUDA " +
                       std::to_string(c.cudnn_cudart_code / 1000) + " but the CUDA runtime is " +
                       c.runtime.version,
                   "install the cuDNN build for CUDA " + std::to_string(runtime_major) +
                       " (or put the matching one first on LD_LIBRARY_PATH)"});
  }
  if (c.runtime.found && c.cublas.found && c.cublas.version_code > 0 &&
      c.cublas.version_code / 10000 != runtime_major) {
    out.push_back(
        {Severity::Warning, "cublas-cuda-mismatch",
         "cuBLAS " + c.cublas.version + " does not belong to CUDA runtime " + c.runtime.version,
         "cuBLAS and the CUDA runtime must come from the same toolkit; check LD_LIBRARY_PATH"});
  }
  check_build_versions(env, out);
  const auto& f = env.fabric;
  const auto header = split(env.build.libfabric_header, '.');
  if (f.loaded && header.size() == 2) {
    const int hmajor = std::stoi(header[0]), hminor = std::stoi(header[1]);
    if (f.major < hmajor || (f.major == hmajor && f.minor < hminor)) {
      out.push_back({Severity::Warning, "libfabric-older-than-build",
                     "libfabric " + f.version + " is loaded but dsx was built against " +
                         env.build.libfabric_header,
                     "features of the newer API may be missing; put the libfabric dsx was built "
                     "with first on "
                     "LD_LIBRARY_PATH"});
    }
    if (has_efa(env) && (f.major < 1 || (f.major == 1 && f.minor < 18))) {
      out.push_back({Severity::Warning, "libfabric-efa-old",
                     "EFA is present but libfabric " + f.version + " is older than 1.18",
                     "aws-ofi-nccl needs libfabric >= 1.18: use the one the EFA installer puts in "
                     "/opt/amazon/efa "
                     "(LD_LIBRARY_PATH=/opt/amazon/efa/lib)"});
    }
  }
}

void check_multi_node(const Environment& env, Findings& out) {
  if (env.job.nodes < 2) return;
  const std::string nodes =
      std::to_string(env.job.nodes) + " nodes (from " + env.job.nodes_source + ")";
  if (!has_rdma(env)) {
    out.push_back(
        {Severity::Warning, "multi-node-no-rdma",
         nodes +
             " but no InfiniBand or EFA device here (/sys/class/infiniband is empty, efa and verbs "
             "providers unusable)",
         "inter-node traffic goes over TCP sockets, often 10x slower than RDMA; on AWS launch "
         "p4d/p5 with "
         "EFA interfaces (dsx cloud aws render), on GCP use GPUDirect-TCPX/TCPXO images"});
  }
  if (const auto* ib = variable(env, "NCCL_IB_DISABLE"); ib && *ib == "1") {
    out.push_back({Severity::Warning, "ib-disabled-multi-node",
                   "NCCL_IB_DISABLE=1 on a job of " + nodes,
                   "NCCL will not use InfiniBand/RoCE between nodes and falls back to sockets; "
                   "unset it unless "
                   "you are debugging the IB fabric (EFA goes through the aws-ofi-nccl plugin and "
                   "is unaffected)"});
  }
}

void check_interface_variable(const Environment& env, const char* name, bool prefix_lists,
                              Findings& out) {
  const auto* value = variable(env, name);
  if (!value) return;
  std::vector<std::string> chosen;
  if (prefix_lists) {
    chosen = select_interfaces(*value, env.interfaces);
  } else {
    for (const auto& want : split(*value, ',')) {
      if (std::find(env.interfaces.begin(), env.interfaces.end(), want) != env.interfaces.end())
        chosen.push_back(want);
    }
  }
  if (chosen.empty()) {
    out.push_back({Severity::Error, "socket-ifname",
                   std::string(name) + "=" + *value +
                       " matches no network interface here (interfaces: " + joined(env.interfaces) +
                       ")",
                   "no socket can be opened there, so the job fails or hangs at init; set it to "
                   "the interface that "
                   "carries the nodes' private addresses (ip -br addr), or unset it"});
  } else if (env.job.nodes > 1 && chosen == std::vector<std::string>{"lo"}) {
    out.push_back({Severity::Error, "socket-ifname-loopback",
                   std::string(name) + "=" + *value +
                       " selects only the loopback interface on a multi-node job",
                   "other nodes cannot reach 127.0.0.1; name the interface with the private IP (ip "
                   "-br addr)"});
  }
}

// NCCL_IB_HCA uses NCCL_SOCKET_IFNAME's list rules over RDMA device names, each with an
// optional ":port".
void check_ib_hca(const Environment& env, Findings& out) {
  const auto* value = variable(env, "NCCL_IB_HCA");
  if (!value) return;
  if (env.rdma_devices.empty()) {
    out.push_back(
        {Severity::Warning, "ib-hca",
         "NCCL_IB_HCA=" + *value + " is set but this host has no RDMA device",
         "NCCL falls back to sockets; on AWS EFA is used through aws-ofi-nccl, not NCCL_IB_HCA"});
    return;
  }
  std::string names =
      join(split(*value, ','), ",", [](const std::string& entry) { return entry.substr(0, entry.find(':')); });
  if (select_interfaces(names, env.rdma_devices).empty()) {
    out.push_back(
        {Severity::Error, "ib-hca",
         "NCCL_IB_HCA=" + *value +
             " matches no RDMA device here (devices: " + joined(env.rdma_devices) + ")",
         "NCCL finds no usable HCA; list devices with ibv_devices and fix or unset NCCL_IB_HCA"});
  }
}

void check_nccl_variables(const Environment& env, Findings& out) {
  for (const auto& [name, value] : env.variables) {
    if (name == "NCCL_TIMEOUT") {
      out.push_back({Severity::Warning, "nccl-timeout",
                     "NCCL_TIMEOUT=" + value + " is set but NCCL has no such variable",
                     "collective timeouts belong to the framework: DSX_COMM_TIMEOUT (seconds) or "
                     "DEEPSPEED_TIMEOUT "
                     "(minutes) for dsx, init_process_group(timeout=) for PyTorch; NCCL_IB_TIMEOUT "
                     "only tunes "
                     "verbs retries"});
    } else if (name.rfind("NCCL_", 0) == 0 &&
               describe_variable(name).empty()) {  // a typo, most often
      auto close = closest_nccl_variable(name);
      out.push_back(
          {Severity::Warning, "unknown-nccl-variable", name + " is not an NCCL variable dsx knows",
           close.empty() ? "check the spelling against NCCL's environment-variable list"
                         : "did you mean " + close + "? NCCL ignores names it does not know"});
    }
  }
  if (const auto* p2p = variable(env, "NCCL_P2P_DISABLE"); p2p && *p2p == "1") {
    out.push_back(
        {Severity::Warning, "p2p-disabled",
         "NCCL_P2P_DISABLE=1: GPUs on this node exchange data through host memory",
         "only needed for broken P2P (some VMs, ACS-enabled PCIe switches); unset it otherwise"});
  }
  if (const auto* proto = variable(env, "NCCL_PROTO")) {
    out.push_back({Severity::Warning, "proto-forced",
                   "NCCL_PROTO=" + *proto + " forces NCCL's protocol",
                   "NVIDIA advises setting it only to rule out a protocol bug; unset it (old "
                   "aws-ofi-nccl <= 1.5 "
                   "recipes needed simple, current ones do not)"});
  }
}

void check_fabric_variables(const Environment& env, Findings& out) {
  const bool efa = has_efa(env);
  if (const auto* rdma = variable(env, "FI_EFA_USE_DEVICE_RDMA"); rdma && *rdma == "1" && !efa) {
    out.push_back(
        {Severity::Error, "efa-rdma-without-efa",
         "FI_EFA_USE_DEVICE_RDMA=1 but this host has no EFA device",
         "libfabric aborts when device RDMA is forced without hardware support; unset it"});
  }
  if (efa) {
    for (const auto& [name, value] : env.variables) {
      if (name.rfind("RDMAV_", 0) == 0) {
        out.push_back(
            {Severity::Warning, "rdmav-on-efa", name + "=" + value + " is set on an EFA host",
             "AWS advises never setting RDMAV_* with EFA (aws-ofi-nccl cheatsheet); unset it"});
      }
    }
  }
  for (const char* name : {"FI_PROVIDER", "DSX_OFI_PROVIDER"}) {
    const auto* provider = variable(env, name);
    if (!provider || provider->empty() || (*provider)[0] == '^') continue;
    bool any_usable = false;
    for (const auto& want : split(*provider, ',')) {
      for (const auto& p : env.fabric.providers) {
        any_usable |= p.usable && (p.name == want || p.provider.rfind(want, 0) == 0);
      }
    }
    if (!any_usable) {
      out.push_back(
          {Severity::Error, "fi-provider-unusable",
           std::string(name) + "=" + *provider + " but no such provider can open an endpoint here",
           "the ofi backend will find no fabric; unset it or pick a usable provider from the list "
           "above"});
    }
  }
  check_interface_variable(env, "FI_TCP_IFACE", false, out);
  check_interface_variable(env, "FI_SOCKETS_IFACE", false, out);
}

}  // namespace

std::vector<std::string> select_interfaces(const std::string& spec,
                                           const std::vector<std::string>& interfaces) {
  std::string list = spec;
  const bool exclude = !list.empty() && list[0] == '^';
  if (exclude) list.erase(0, 1);
  const bool exact = !list.empty() && list[0] == '=';
  if (exact) list.erase(0, 1);
  const auto patterns = split(list, ',');
  std::vector<std::string> chosen;
  for (const auto& iface : interfaces) {
    bool match = std::any_of(patterns.begin(), patterns.end(), [&](const std::string& p) {
      return exact ? iface == p : iface.rfind(p, 0) == 0;
    });
    if (match != exclude) chosen.push_back(iface);
  }
  return chosen;
}

std::vector<Finding> run_checks(const Environment& env) {
  Findings out;
  check_gpus(env, out);
  check_versions(env, out);
  check_multi_node(env, out);
  check_interface_variable(env, "NCCL_SOCKET_IFNAME", true, out);
  check_interface_variable(env, "GLOO_SOCKET_IFNAME", false, out);
  check_ib_hca(env, out);
  check_nccl_variables(env, out);
  check_fabric_variables(env, out);
  std::stable_sort(out.begin(), out.end(),
                   [](const Finding& a, const Finding& b) { return a.severity > b.severity; });
  return out;
}

}  // namespace dsx::report
