// libFuzzer entry for the ds_config reader: any bytes must end in a dsx::Error or a valid
// config that can be listed. A crash, a sanitizer report, a hang or another exception is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "dsx/error.h"
#include "config/ds_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  dsx::config::ConfigInputs inputs;
  // The first byte (when present) varies the command line too.
  if (size > 0) {
    inputs.world_size = 1 + data[0] % 8;
    if (data[0] & 0x10) inputs.hidden_size = 64 * (1 + data[0] % 64);
    if (data[0] & 0x20) inputs.micro_batch = 1 + data[0] % 4;
    inputs.strict = (data[0] & 0x40) != 0;
  }
  try {
    auto config = dsx::config::read_ds_config_text(text, "fuzz.json", inputs);
    auto flat = dsx::config::flatten(config);
    if (flat.empty() || config.train_batch_size <= 0) std::abort();
  } catch (const dsx::Error& e) {
    if (e.kind() == dsx::ErrorKind::Internal) std::abort();
  }
  return 0;
}
