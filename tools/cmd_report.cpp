// `dsx report`: this machine as a multi-GPU job sees it (ds_report and `nvidia-smi topo -m` in
// one), then checks with advice. Parses flags and prints; the probes and checks are in
// tools/report/.

#include <cstdio>
#include <iostream>

#include "dsx/error.h"
#include "tools/report/checks.h"
#include "tools/report/cuda_libraries.h"
#include "tools/report/environment.h"
#include "tools/report/variable_catalog.h"
#include "tools/cli.h"
#include "tools/json_fields.h"

namespace dsx::tools {

namespace rep = dsx::report;

namespace {

void line(const std::string& key, const std::string& value) {
  std::printf("  %-16s %s\n", key.c_str(), value.c_str());
}

std::string library_text(const rep::LibraryInfo& lib) {
  if (!lib.found) return "not found" + (lib.note.empty() ? "" : ": " + lib.note);
  std::string text =
      (lib.version.empty() ? "unknown version" : lib.version) + "  (" + lib.path + ")";
  if (!lib.note.empty()) text += ", " + lib.note;
  return text;
}

std::string gib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB",
                static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

// A cell of the topology matrix as `nvidia-smi topo -m` writes it: NV# with the NVLink count.
std::string link_cell(const rep::GpuTopology& topo, size_t i, size_t j) {
  std::string cell = to_string(topo.links[i][j]);
  if (topo.links[i][j] == rep::GpuLink::NvLink) cell += std::to_string(topo.nvlink_counts[i][j]);
  return cell;
}

void print_topology(const rep::GpuTopology& topo) {
  const size_t n = topo.gpus.size();
  std::printf("\n  %-6s", "");
  for (size_t j = 0; j < n; ++j) std::printf(" %-6s", ("GPU" + std::to_string(j)).c_str());
  std::printf(" NUMA\n");
  for (size_t i = 0; i < n; ++i) {
    std::printf("  %-6s", ("GPU" + std::to_string(i)).c_str());
    for (size_t j = 0; j < n; ++j) {
      std::printf(" %-6s", link_cell(topo, i, j).c_str());
    }
    std::printf(" %s\n",
                topo.gpus[i].numa_node >= 0 ? std::to_string(topo.gpus[i].numa_node).c_str() : "-");
  }
  std::printf(
      "\n  X self, NV# # NVLinks, PIX one PCIe switch, PXB several switches, PHB host bridge,\n"
      "  NODE across host bridges in one NUMA node, SYS across NUMA nodes (SMP interconnect)\n");
}

void print_text(const rep::Environment& env, const std::vector<rep::Finding>& findings) {
  std::printf("dsx\n");
  line("version", env.build.version);
  std::string build = "CPU-only (no CUDA code built in)";
  if (env.build.cuda) {
    build = "CUDA";
    if (env.build.cudart_code) build += " " + rep::cuda_version_text(env.build.cudart_code);
    if (env.build.nccl_code) build += ", NCCL " + rep::nccl_version_text(env.build.nccl_code);
    if (env.build.cudnn_code) build += ", cuDNN " + rep::cudnn_version_text(env.build.cudnn_code);
  }
  line("build", build);
  line("compiler", env.build.compiler + ", C++ " + std::to_string(env.build.cxx_standard));
  std::printf("CPU\n");
  line("model", env.cpu.model.empty() ? "unknown" : env.cpu.model);
  line("cores online", std::to_string(env.cpu.online_cores));
  std::string simd;
  for (const auto& s : env.cpu.simd) simd += s + " ";
  line("SIMD", simd.empty() ? "none detected" : simd);
  line("dsx kernels", env.cpu.kernel_simd + " path (DSX_SIMD lowers it)");
  std::printf("CUDA\n");
  line("runtime", library_text(env.cuda.runtime));
  line("driver", library_text(env.cuda.driver));
  line("cuBLAS", library_text(env.cuda.cublas));
  line("cuDNN", library_text(env.cuda.cudnn));
  line("NCCL", library_text(env.cuda.nccl));
  std::printf("libfabric\n");
  line("version", env.fabric.version + " (dsx built against " + env.build.libfabric_header + ")");
  for (const auto& p : env.fabric.providers) {
    line(p.name, p.usable ? "usable as " + p.provider + (p.detail.empty() ? "" : " on " + p.detail)
                          : "not usable: " + p.detail);
  }
  std::printf("GPUs\n");
  if (env.gpus.gpus.empty()) {
    line("none", env.gpus.unavailable_reason);
  } else {
    line("driver", env.gpus.driver_version);
    for (const auto& g : env.gpus.gpus) {
      line("GPU" + std::to_string(g.index), g.name + ", " + gib(g.memory_bytes) + ", " + g.bus_id);
    }
    print_topology(env.gpus);
  }
  std::printf("network\n");
  std::string ifaces;
  for (const auto& i : env.interfaces) ifaces += i + " ";
  line("interfaces", ifaces);
  std::string rdma;
  for (const auto& d : env.rdma_devices) rdma += d + " ";
  line("RDMA devices", rdma.empty() ? "none (no InfiniBand or EFA)" : rdma);
  line("nodes", std::to_string(env.job.nodes) + " (" + env.job.nodes_source + ")");
  std::printf("environment\n");
  if (env.variables.empty()) line("", "no NCCL_*, FI_* or job variables set");
  for (const auto& [name, value] : env.variables) {
    auto what = rep::describe_variable(name);
    std::printf("  %s=%s\n      %s\n", name.c_str(), value.c_str(),
                what.empty() ? "(not a variable dsx knows)" : what.c_str());
  }
  std::printf("checks\n");
  int errors = 0, warnings = 0;
  for (const auto& f : findings) {
    errors += f.severity == rep::Severity::Error;
    warnings += f.severity == rep::Severity::Warning;
    std::printf("  [%s] %s: %s\n      -> %s\n", to_string(f.severity), f.id.c_str(),
                f.message.c_str(), f.advice.c_str());
  }
  std::printf("  %d error(s), %d warning(s)\n", errors, warnings);
}

void write_library(JsonWriter& w, const char* key, const rep::LibraryInfo& lib) {
  w.Key(key);
  w.StartObject();
  field(w, "found", lib.found);
  w.Key("version");
  lib.version.empty() ? w.Null() : w.String(lib.version.c_str());
  field(w, "version_code", lib.version_code);
  field(w, "path", lib.path);
  field(w, "note", lib.note);
  w.EndObject();
}

void write_strings(JsonWriter& w, const char* key, const std::vector<std::string>& items) {
  w.Key(key);
  w.StartArray();
  for (const auto& s : items) w.String(s.c_str());
  w.EndArray();
}

// The sections of `dsx report --json`, in order.
void write_build(JsonWriter& w, const rep::Environment& env) {
  w.Key("dsx");
  w.StartObject();
  field(w, "version", env.build.version);
  field(w, "cuda_built", env.build.cuda);
  field(w, "compiler", env.build.compiler);
  field(w, "cxx_standard", env.build.cxx_standard);
  field(w, "libfabric_header", env.build.libfabric_header);
  field(w, "built_cudart_code", env.build.cudart_code);
  field(w, "built_nccl_code", env.build.nccl_code);
  field(w, "built_cudnn_code", env.build.cudnn_code);
  w.EndObject();
}

void write_cpu(JsonWriter& w, const rep::Environment& env) {
  w.Key("cpu");
  w.StartObject();
  field(w, "model", env.cpu.model);
  field(w, "online_cores", env.cpu.online_cores);
  write_strings(w, "simd", env.cpu.simd);
  field(w, "kernel_simd", env.cpu.kernel_simd);
  w.EndObject();
}

void write_cuda(JsonWriter& w, const rep::Environment& env) {
  w.Key("cuda");
  w.StartObject();
  write_library(w, "runtime", env.cuda.runtime);
  write_library(w, "driver", env.cuda.driver);
  write_library(w, "cublas", env.cuda.cublas);
  write_library(w, "cudnn", env.cuda.cudnn);
  write_library(w, "nccl", env.cuda.nccl);
  w.EndObject();
}

void write_fabric(JsonWriter& w, const rep::Environment& env) {
  w.Key("libfabric");
  w.StartObject();
  field(w, "version", env.fabric.version);
  w.Key("providers");
  w.StartArray();
  for (const auto& p : env.fabric.providers) {
    w.StartObject();
    field(w, "name", p.name);
    field(w, "usable", p.usable);
    field(w, "provider", p.provider);
    field(w, "detail", p.detail);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

void write_gpus(JsonWriter& w, const rep::Environment& env) {
  w.Key("gpus");
  w.StartObject();
  field(w, "nvml_loaded", env.gpus.nvml_loaded);
  field(w, "driver_version", env.gpus.driver_version);
  field(w, "unavailable_reason", env.gpus.unavailable_reason);
  w.Key("devices");
  w.StartArray();
  for (size_t i = 0; i < env.gpus.gpus.size(); ++i) {
    const auto& g = env.gpus.gpus[i];
    w.StartObject();
    field(w, "index", g.index);
    field(w, "name", g.name);
    field(w, "memory_bytes", g.memory_bytes);
    field(w, "bus_id", g.bus_id);
    field(w, "numa_node", g.numa_node);
    w.Key("links");
    w.StartArray();
    for (size_t j = 0; j < env.gpus.links[i].size(); ++j)
      w.String(link_cell(env.gpus, i, j).c_str());
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

void write_host(JsonWriter& w, const rep::Environment& env) {
  write_strings(w, "interfaces", env.interfaces);
  write_strings(w, "rdma_devices", env.rdma_devices);
  field(w, "nodes", env.job.nodes);
  w.Key("variables");
  w.StartArray();
  for (const auto& [name, value] : env.variables) {
    w.StartObject();
    field(w, "name", name);
    field(w, "value", value);
    field(w, "meaning", rep::describe_variable(name));
    w.EndObject();
  }
  w.EndArray();
}

void write_findings(JsonWriter& w, const std::vector<rep::Finding>& findings) {
  w.Key("findings");
  w.StartArray();
  for (const auto& f : findings) {
    w.StartObject();
    field(w, "severity", to_string(f.severity));
    field(w, "id", f.id);
    field(w, "message", f.message);
    field(w, "advice", f.advice);
    w.EndObject();
  }
  w.EndArray();
}

void print_json(const rep::Environment& env, const std::vector<rep::Finding>& findings) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  write_build(w, env);
  write_cpu(w, env);
  write_cuda(w, env);
  write_fabric(w, env);
  write_gpus(w, env);
  write_host(w, env);
  write_findings(w, findings);
  w.EndObject();
  std::cout << buffer.GetString() << "\n";
}

// --check: each error as "dsx report: <id>: <what>; <what to do>"; 1 when there is one.
int print_errors(const std::vector<rep::Finding>& findings) {
  int errors = 0;
  for (const auto& f : findings) {
    if (f.severity != rep::Severity::Error) continue;
    std::cout << "dsx report: " << f.id << ": " << f.message << "; " << f.advice << "\n";
    ++errors;
  }
  if (errors == 0) std::cout << "dsx report: no errors\n";
  return errors == 0 ? 0 : 1;
}

}  // namespace

int run_report(int argc, char** argv) {
  po::options_description options("dsx report");
  // clang-format off
  options.add_options()
      ("nodes", po::value<int>()->default_value(0), "nodes the job will span (default: from WORLD_SIZE etc.)")
      ("json", po::bool_switch(), "print JSON")
      ("check", po::bool_switch(), "print only the errors, one line each, and exit 1 if there is one "
                                   "(a node's readiness check)");
  // clang-format on
  auto args = parse_args(argc, argv, "dsx report [--nodes N] [--json | --check]", options);
  if (args.help) return 0;
  const int nodes = args.vars["nodes"].as<int>();
  if (nodes < 0) throw Error(ErrorKind::Usage, "dsx report: --nodes must not be negative");
  const auto env = rep::probe_environment(DSX_VERSION, nodes);
  const auto findings = rep::run_checks(env);
  if (args.vars["check"].as<bool>()) return print_errors(findings);
  if (args.vars["json"].as<bool>()) {
    print_json(env, findings);
  } else {
    print_text(env, findings);
  }
  return 0;
}

}  // namespace dsx::tools
