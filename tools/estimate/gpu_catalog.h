// GPU types `dsx estimate --gpu` knows, with the total memory nvidia-smi reports for each.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace dsx::estimate {

struct GpuType {
  const char* name;
  const char* description;
  int64_t memory_bytes;
};

std::span<const GpuType> gpu_types();

// Throws dsx::Error(Usage) listing the known names.
GpuType find_gpu_type(const std::string& name);

}  // namespace dsx::estimate
