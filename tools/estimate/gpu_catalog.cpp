// Memory sizes are nvidia-smi's "Total" in MiB: what the driver lets a process see, which is
// less than the marketing figure for HBM parts (an "80 GB" H100 shows 81559 MiB).
#include "tools/estimate/gpu_catalog.h"

#include <array>
#include <cctype>

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

GpuType find_gpu_type(const std::string& written) {
  // Short names as people write them; an A100 without its size is taken as the 40 GB part, the
  // smaller of the two, so what fits it fits the 80 GB one too.
  std::string name;
  for (char c : written) name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (name == "h100" || name == "h100-sxm" || name == "h100-80g") name = "h100-80gb";
  if (name == "a100" || name == "a100-40g") name = "a100-40gb";
  if (name == "a100-80g") name = "a100-80gb";
  if (name == "4090" || name == "rtx-4090") name = "rtx4090";
  if (name == "h200-141gb") name = "h200";
  std::string known;
  for (const auto& t : gpu_types()) {
    if (name == t.name) return t;
    known += known.empty() ? "" : ", ";
    known += t.name;
  }
  throw Error(ErrorKind::Usage, "unknown GPU type '" + written + "'; known types: " + known +
                                    " (or give the memory size with --gpu-mem-gib)");
}

}  // namespace dsx::estimate
