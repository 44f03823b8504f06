// What a ds_config file decides for a memory estimate: the ZeRO stage and offload, the
// micro-batch, the precision and the bucket sizes. Read with dsx's ds_config reader, so
// `dsx estimate --ds-config` sizes exactly the run that file describes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tools/estimate/memory_model.h"

namespace dsx::estimate {

struct DsConfigChoices {
  ZeroOption option;
  int64_t micro_batch = 1;
  Precision precision = Precision::Fp32;
  int64_t reduce_bucket_size = 0;
  int64_t prefetch_bucket_size = 0;
  bool overlap_comm = false;
  // ZeRO-Infinity's swap buffers (DeepSpeed's defaults unless the file sets them)
  int64_t sub_group_size = 1000000000;
  int64_t optimizer_buffer_count = 4;
  int64_t param_buffer_count = 5;
  int64_t param_buffer_size = 100000000;
};

// world_size and hidden_size resolve the batch triad and "auto" values as a run would;
// micro_batch (the command line's) fills an "auto" micro-batch. Throws dsx::Error: Config or
// Io from the reader, Unsupported for parameter offload without optimizer offload or with
// the two on different devices (not modelled).
DsConfigChoices read_ds_config_choices(const std::string& path, int64_t world_size,
                                       int64_t hidden_size, std::optional<int64_t> micro_batch);

}  // namespace dsx::estimate
