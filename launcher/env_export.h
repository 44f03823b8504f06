// Which variables of the runner's environment reach the other nodes (multi-node backends only;
// a local launch inherits everything), as DeepSpeed decides it: PYTHONPATH with the working
// directory in front, every variable whose name starts with an exported prefix, then the
// `.deepspeed_env` files (or $DS_ENV_FILE) from the home directory and the working directory.
#pragma once

#include <string>
#include <vector>

#include "launcher/rank_env.h"

namespace dsx::launcher {

// The process environment, in environ order.
std::vector<EnvVar> current_environment();

// Name prefixes exported to other nodes: DeepSpeed's list for CUDA plus dsx's FI_ (libfabric)
// and DSX_.
const std::vector<std::string>& exported_prefixes();

// One KEY=VALUE per line, key and value stripped. dsx also accepts blank lines, `#` comments and
// an `export ` prefix (DeepSpeed crashes on them). A line without '=' is an error naming the
// file and line.
std::vector<EnvVar> parse_env_file(const std::string& text, const std::string& path);

// The variables to export, later entries overriding earlier ones with the same name removed.
std::vector<EnvVar> collect_exports(const std::vector<EnvVar>& environment, const std::string& cwd,
                                    const std::string& home);

// The value of `name` in `environment`, or "".
std::string env_value(const std::vector<EnvVar>& environment, const std::string& name);

// Sets `name` to `value` (replacing an existing entry) or removes it when `value` is null.
void env_set(std::vector<EnvVar>& environment, const std::string& name, const std::string* value);

}  // namespace dsx::launcher
