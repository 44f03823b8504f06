// The cluster bench each node runs before the hostfile (docs/cloud.md 1.5, 2.4): the
// `dsx bench comm` flags per machine, and the healthy figure the public measurements give for
// it (shared/ref/comm.md section 3), or none where none is recorded.
#pragma once

#include <string_view>

namespace dsx::cloud {

struct HealthBench {
  std::string_view machine;    // "p5.48xlarge", "a3-highgpu-8g"
  std::string_view args;       // dsx bench comm flags
  std::string_view reference;  // "" when no measurement is recorded
};

// The bench for an AWS instance type or GCP machine type (a default for others).
const HealthBench& health_bench(std::string_view machine);

// "reference: <figure>" or "reference: none recorded".
std::string_view health_reference_line(std::string_view machine);

}  // namespace dsx::cloud
