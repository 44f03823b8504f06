// Memory sizes are nvidia-smi's "Total" in MiB: what the driver lets a process see, which is
// less than the marketing figure for HBM parts (an "80 GB" H100 shows 81559 MiB).
#include "engine/estimate/gpu_catalog.h"

#include <array>

#include "dsx/error.h"

namespace dsx::estimate {

namespace {
constexpr int64_t kMiB = 1024 * 1024;
}

std::span<const GpuType> gpu_types() {
  static const std::array types = {
      GpuType{"rtx4090", "GeForce RTX 4090 24 GB", 24564 * kMiB},
      GpuType{"a100-40gb", "A100 40 GB (p4d, a2-highgpu)", 40960 * kMiB},
      GpuType{"a100-80gb", "A100 80 GB (p4de, a2-ultragpu)", 81920 * kMiB},
      GpuType{"h100-80gb", "H100 80 GB SXM (p5, a3)", 81559 * kMiB},
      GpuType{"h200", "H200 141 GB (p5e, p5en, a3-ultra)", 143771 * kMiB},
  };
  return types;
}

GpuType find_gpu_type(const std::string& name) {
  std::string known;
  for (const auto& t : gpu_types()) {
    if (name == t.name) return t;
    known += known.empty() ? "" : ", ";
    known += t.name;
  }
  throw Error(ErrorKind::Usage, "unknown GPU type '" + name + "'; known types: " + known +
                                    " (or give the memory size with --gpu-mem-gib)");
}

}  // namespace dsx::estimate
