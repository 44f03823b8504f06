// Saving and resuming a training run in DeepSpeed's checkpoint layout (engine/checkpoint/layout.h):
// rank 0 (on nodes' own disks: each node's lowest rank) writes the full model weights and the
// engine's counters; every rank writes its ZeRO
// partition (fp32 master weights and optimizer state) with the loss scaler and its data position.
// A save is all-or-nothing across ranks: each rank reports its files (or its error) through the
// rendezvous store, rank 0 verifies them and moves `latest`, and every rank learns the outcome, so
// a full disk on one rank fails the save everywhere with the same message and never hangs.
#pragma once

#include <string>

#include "comm/communicator.h"
#include "comm/store/store.h"
#include "engine/node_checkpoint.h"
#include "engine/trainer.h"
#include "models/data/loader.h"
#include "models/model.h"

namespace dsx::engine {

// Saves under `tag` ("" = global_step<N>); returns the tag. A collective: every rank calls it.
// `options.tag_validation` (ds_config checkpoint.tag_validation): what to do when ranks' tags differ.
// `model_json` (a JSON object: the model's shape under "model", the seed, the ds_config text) is
// kept with the weights, for `dsx export` and for the record.
struct SaveOptions {
  std::string tag_validation = "Warn";  // ds_config checkpoint.tag_validation
  // ds_config checkpoint.use_node_local_storage. Every save probes whether the nodes share
  // save_dir: when they do not, each node keeps its own ranks' files (node_checkpoint.h); when
  // they do, one copy is saved. The flag only decides which of the two gets a note.
  bool node_local_storage = false;
};

std::string save_training_checkpoint(const std::string& save_dir, const std::string& tag, Trainer& trainer,
                                     const models::Model& model, const models::DataLoader& loader,
                                     comm::Communicator& comm, comm::Store& store, const std::string& model_json,
                                     const SaveOptions& options = {});

// Which checkpoint of `load_dir` to resume from (`tag`, or the one `latest` names), agreed by every
// node: a collective. found is false when no save has completed there yet.
ResumePoint find_resume_point(const std::string& load_dir, const std::string& tag, comm::Communicator& comm,
                              comm::Store& store);

// Restores every rank's state from `tag` ("" = latest). A checkpoint saved by another world size
// or ZeRO stage is re-cut into this job's partitions. Throws dsx::Error naming the file when the
// checkpoint is incomplete, damaged, or holds another model.
std::string load_training_checkpoint(const std::string& load_dir, const std::string& tag, Trainer& trainer,
                                     const models::Model& model, models::DataLoader& loader,
                                     comm::Communicator& comm);

}  // namespace dsx::engine
