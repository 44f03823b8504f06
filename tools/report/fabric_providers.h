// libfabric's version and which providers can open a reliable tagged endpoint here (what the
// ofi backend needs), found by asking fi_getinfo for each one.
#pragma once

#include "tools/report/environment.h"

namespace dsx::report {

FabricInfo probe_fabric_providers();

// The libfabric version dsx was compiled against ("1.17").
std::string fabric_header_version();

}  // namespace dsx::report
