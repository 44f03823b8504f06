// Training checkpoints over the crash-safe checkpoint files (see train_checkpoint.h).
#include "engine/train_checkpoint.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>
#include <vector>

#include "dsx/error.h"
#include "dsx/json_input.h"
#include "checkpoint/layout.h"
#include "checkpoint/load.h"
#include "checkpoint/save.h"
#include "checkpoint/tag_validation.h"
#include "engine/node_checkpoint.h"
#include "trace/trace.h"

namespace dsx::engine {
namespace {

namespace ck = checkpoint;
using Json = rapidjson::Document;

constexpr auto kSaveTimeout = std::chrono::minutes(10);

std::string to_text(const rapidjson::Value& v) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  v.Accept(writer);
  return buffer.GetString();
}

Json parse(const std::string& text, const std::string& origin) {
  Json d = parse_json(text, origin);
  if (!d.IsObject()) throw Error(ErrorKind::Format, origin + ": its metadata is not a JSON object");
  return d;
}

int64_t get_int(const rapidjson::Value& obj, const char* key, const std::string& origin) {
  auto it = obj.FindMember(key);
  if (it == obj.MemberEnd() || !it->value.IsInt64()) {
    throw Error(ErrorKind::Format, origin + ": metadata lacks the integer \"" + key + "\"");
  }
  return it->value.GetInt64();
}

double get_double(const rapidjson::Value& obj, const char* key, const std::string& origin) {
  auto it = obj.FindMember(key);
  if (it == obj.MemberEnd() || !it->value.IsNumber()) {
    throw Error(ErrorKind::Format, origin + ": metadata lacks the number \"" + key + "\"");
  }
  return it->value.GetDouble();
}

// The model states, DeepSpeed's way: at stages 0-2 rank 0 writes mp_rank_00_model_states; at
// stage 3 every rank writes zero_pp_rank_<r>_mp_rank_00_model_states. Each holds the engine
// counters; `with_weights` (rank 0, or each node's first rank on node-local disks) adds the full
// model, a tensor per parameter under the model's names, so that export reads one file.
void write_model_states(ck::RankWriter& writer, Trainer& trainer, const models::Model& model,
                        const std::vector<float>& weights, int rank, int world, bool with_weights,
                        const std::string& model_json) {
  std::vector<ck::TensorRef> tensors;
  for (const models::ParamSpec& spec : model.params()) {
    if (!with_weights) break;
    tensors.push_back({"module." + spec.name, ck::TensorDType::F32, spec.shape, weights.data() + spec.offset});
  }
  Json meta(rapidjson::kObjectType);
  auto& a = meta.GetAllocator();
  meta.AddMember("global_steps", trainer.global_steps(), a);
  meta.AddMember("skipped_steps", trainer.skipped_steps(), a);
  meta.AddMember("micro_steps", trainer.micro_steps(), a);
  meta.AddMember("schedule_iteration", trainer.schedule_iteration(), a);
  meta.AddMember("dp_world_size", world, a);
  meta.AddMember("zero_stage", trainer.zero().stage(), a);
  meta.AddMember("num_params", static_cast<int64_t>(model.num_params()), a);
  // The caller's description of the run: {"model": {...}, "seed": ..., "ds_config": "..."}.
  Json run = parse(model_json.empty() ? "{}" : model_json, "the run description");
  for (auto& m : run.GetObject()) meta.AddMember(rapidjson::Value(m.name, a), rapidjson::Value(m.value, a), a);
  const bool stage3 = trainer.zero().stage() == 3;
  writer.write_tensor_file(stage3 ? ck::zero_model_states_file_name(rank) : ck::model_states_file_name(), tensors,
                           to_text(meta));
}

// every rank's file: its partition of master weights and optimizer state, scaler, data position.
void write_partition(ck::RankWriter& writer, Trainer& trainer, const models::DataLoader& loader, int rank) {
  zero::ZeroEngine& z = trainer.zero();
  const int64_t n = static_cast<int64_t>(z.master_numel());
  const zero::ZeroEngine::PartitionState state = z.save_partition();  // host copies, wherever ZeRO lives
  std::vector<ck::TensorRef> tensors = {{"fp32_flat_partition", ck::TensorDType::F32, {n}, state.master.data()}};
  for (const auto& [name, values] : state.optimizer) {
    tensors.push_back({"optimizer_state." + name, ck::TensorDType::F32, {n}, values.data()});
  }
  const zero::LossScalerState& s = z.loss_scaler().state();
  const models::LoaderPosition pos = loader.position();
  Json meta(rapidjson::kObjectType);
  auto& a = meta.GetAllocator();
  meta.AddMember("rank", rank, a);
  meta.AddMember("zero_stage", z.stage(), a);
  meta.AddMember("partition_numel", n, a);
  meta.AddMember("optimizer_steps", z.optimizer().steps(), a);
  meta.AddMember("loss_scale", s.scale, a);
  meta.AddMember("loss_scale_iteration", s.iteration, a);
  meta.AddMember("loss_scale_last_overflow", s.last_overflow, a);
  meta.AddMember("loss_scale_hysteresis_left", s.hysteresis_left, a);
  meta.AddMember("data_epoch", static_cast<int64_t>(pos.epoch), a);
  meta.AddMember("data_shard", static_cast<int64_t>(pos.shard), a);
  meta.AddMember("data_sample", static_cast<int64_t>(pos.sample), a);
  meta.AddMember("data_rows_per_step", static_cast<int64_t>(loader.rows_per_step()), a);
  writer.write_tensor_file(ck::zero_optim_states_file_name(rank, false), tensors, to_text(meta));
}

}  // namespace

namespace {

// Rank 0's verdict on the ranks' tags before any file is checked: "ok" or why not to commit.
std::string check_tags(comm::Store& store, const std::string& key, int rank, int world, const std::string& tag,
                       const std::string& tag_validation) {
  const ck::TagValidation validation = ck::parse_tag_validation(tag_validation);
  if (validation == ck::TagValidation::Ignore) return "ok";
  store.set(key + "tag/" + std::to_string(rank), tag);
  if (rank != 0) return "ok";
  std::vector<std::string> tags;
  for (int r = 0; r < world; ++r) tags.push_back(store.get(key + "tag/" + std::to_string(r), kSaveTimeout));
  try {
    if (auto warning = ck::check_tag_agreement(validation, 0, tags)) std::cerr << "dsx: warning: " << *warning << "\n";
  } catch (const Error& e) {
    return e.what();
  }
  return "ok";
}

// Rank 0 commits a save whose files all lie in one directory it sees; every rank learns the outcome.
std::string commit_shared(comm::Store& store, const std::string& key, int rank, int world, const std::string& save_dir,
                          const std::string& tag, std::string outcome) {
  if (rank == 0) {
    std::vector<ck::RankManifest> manifests;
    for (int r = 0; r < world; ++r) {
      const std::string value = store.get(key + "rank/" + std::to_string(r), kSaveTimeout);
      if (value.rfind("error:", 0) == 0) {
        if (outcome == "ok") outcome = "rank " + std::to_string(r) + ": " + value.substr(6);
        continue;
      }
      manifests.push_back(ck::RankManifest::from_json(value, "rank " + std::to_string(r) + "'s manifest"));
    }
    if (outcome == "ok") {
      try {
        trace::Scope commit("verify and commit", "checkpoint");
        ck::commit(save_dir, tag, manifests);
      } catch (const Error& e) {
        outcome = e.what();
      }
    }
    store.set(key + "outcome", outcome);
  }
  trace::Scope wait("wait for the commit", "wait");
  return store.get(key + "outcome", kSaveTimeout);
}

// A random id for this save, from rank 0, so that nodes tell two saves of one tag apart.
std::string agree_on_save_id(comm::Store& store, const std::string& key, int rank) {
  if (rank == 0) {
    std::random_device random;
    char id[32];
    std::snprintf(id, sizeof id, "%08x%08x", random(), random());
    store.set(key + "save_id", id);
  }
  return store.get(key + "save_id", kSaveTimeout);
}

NodeCommit node_commit(comm::Store& store, const std::string& key, int rank, int world) {
  return NodeCommit{store, key, rank, world,
                    discover_node_layout(store, key + "nodes/", rank, world, node_name_from_environment(), kSaveTimeout),
                    kSaveTimeout};
}

}  // namespace

std::string save_training_checkpoint(const std::string& save_dir, const std::string& tag_in, Trainer& trainer,
                                     const models::Model& model, const models::DataLoader& loader,
                                     comm::Communicator& comm, comm::Store& store, const std::string& model_json,
                                     const SaveOptions& options) {
  const std::string tag = tag_in.empty() ? ck::default_tag(trainer.global_steps()) : tag_in;
  const int rank = comm.rank();
  const int world = comm.size();
  trace::Scope save_span("save checkpoint", "phase");
  save_span.add({"tag", tag});
  std::vector<float> weights(model.num_params());
  {
    trace::Scope gather("gather weights", "checkpoint");
    trainer.zero().gather_params(weights.data());  // a collective at stage 3: before anything can fail
  }

  // Keys unique to this save, so that saving the same tag twice never reads old answers.
  const std::string key = "dsx/checkpoint/" + tag + "/" + std::to_string(trainer.micro_steps()) + "/";
  const NodeCommit nodes = node_commit(store, key, rank, world);
  const bool leader = nodes.layout.leads(rank);
  // Probed whatever the config says: DeepSpeed configs carry use_node_local_storage onto shared
  // file systems, where per-node commits of one directory would collide. There one copy is enough.
  const bool node_local = nodes.layout.nodes > 1 && !save_directory_shared(nodes, save_dir);
  if (rank == 0 && nodes.layout.nodes > 1 && node_local != options.node_local_storage) {
    std::cerr << "dsx: note: "
              << (node_local ? save_dir + " is not one directory the " + std::to_string(nodes.layout.nodes) +
                                   " nodes share: each node keeps its own ranks' files, as with "
                                   "checkpoint.use_node_local_storage (a resume needs the same nodes; "
                                   "docs/checkpoints.md)"
                             : "checkpoint.use_node_local_storage: " + save_dir + " is one directory the " +
                                   std::to_string(nodes.layout.nodes) + " nodes share: one copy is saved, as "
                                   "without the flag")
              << "\n";
  }
  try {
    trace::Scope write("write files", "checkpoint");
    ck::RankWriter writer(save_dir, tag, rank);
    const bool with_weights = node_local ? leader : rank == 0;
    if (with_weights || trainer.zero().stage() == 3)
      write_model_states(writer, trainer, model, weights, rank, world, with_weights, model_json);
    write_partition(writer, trainer, loader, rank);
    if (node_local && leader) checkpoint_fault_point("write", nodes.layout.node);
    store.set(key + "rank/" + std::to_string(rank), writer.manifest().to_json());
  } catch (const Error& e) {
    store.set(key + "rank/" + std::to_string(rank), std::string("error:") + e.what());
  }

  const std::string precheck = check_tags(store, key, rank, world, tag, options.tag_validation);
  std::string outcome;
  if (node_local) {
    trace::Scope commit("verify and commit on every node", "checkpoint");
    outcome = commit_on_nodes(nodes, save_dir, tag, agree_on_save_id(store, key, rank), trainer.global_steps(),
                              precheck);
  } else {
    outcome = commit_shared(store, key, rank, world, save_dir, tag, precheck);
  }
  if (outcome != "ok") {
    throw Error(ErrorKind::Io, "saving checkpoint " + tag + " in " + save_dir + " failed (the previous checkpoint is "
                               "untouched): " + outcome);
  }
  return tag;
}

ResumePoint find_resume_point(const std::string& load_dir, const std::string& tag, comm::Communicator& comm,
                              comm::Store& store) {
  return agree_on_resume(node_commit(store, "dsx/resume/", comm.rank(), comm.size()), load_dir, tag);
}

namespace {

// The data position of a save, also when it was made at another world x micro-batch (an
// elastic restart): the loader continues at the same example, or this says why it cannot.
void seek_saved_position(const rapidjson::Value& part, const std::string& origin,
                         const models::LoaderPosition& pos, models::DataLoader& loader) {
  const auto it = part.FindMember("data_rows_per_step");  // absent in older checkpoints
  const bool recorded = it != part.MemberEnd() && it->value.IsInt64();
  const uint64_t saved_rows = recorded ? static_cast<uint64_t>(it->value.GetInt64()) : 0;
  if (saved_rows == 0 || saved_rows == loader.rows_per_step()) return loader.seek(pos);
  if (loader.seek_from_width(pos, saved_rows)) return;
  throw Error(ErrorKind::Usage,
              origin + ": saved by a run reading " + std::to_string(saved_rows) +
                  " rows per micro-step (world x micro-batch); this run reads " +
                  std::to_string(loader.rows_per_step()) +
                  " and this data's order cannot continue at another width without repeating or "
                  "skipping samples. Resume at the saved world size and micro-batch");
}

// The scaler, the optimizer's step count and the data position saved with a partition.
void restore_rank_meta(const rapidjson::Value& part, const std::string& origin, zero::ZeroEngine& z,
                       models::DataLoader& loader) {
  z.optimizer().set_steps(get_int(part, "optimizer_steps", origin));
  zero::LossScalerState s;
  s.scale = get_double(part, "loss_scale", origin);
  s.iteration = get_int(part, "loss_scale_iteration", origin);
  s.last_overflow = get_int(part, "loss_scale_last_overflow", origin);
  s.hysteresis_left = static_cast<int>(get_int(part, "loss_scale_hysteresis_left", origin));
  z.loss_scaler().restore(s);
  models::LoaderPosition pos;
  pos.epoch = static_cast<uint64_t>(get_int(part, "data_epoch", origin));
  pos.shard = static_cast<uint64_t>(get_int(part, "data_shard", origin));
  pos.sample = static_cast<uint64_t>(get_int(part, "data_sample", origin));
  seek_saved_position(part, origin, pos, loader);
}

// A partition saved by a rank of another layout is named as such (not as a tensor of the wrong size).
void check_partition_numel(const rapidjson::Value& part, const std::string& origin, uint64_t numel) {
  const int64_t saved = get_int(part, "partition_numel", origin);
  if (saved != static_cast<int64_t>(numel)) {
    throw Error(ErrorKind::Format, origin + ": its partition has " + std::to_string(saved) + " elements, this rank's has " +
                                       std::to_string(numel));
  }
}

// This rank's master partition and optimizer states, copied into `state` in the same pass that
// checksums the file (read_tensor_file_into): the file's bytes are read once. When that refuses
// the file, an intact file whose partition is of another size is said so; any other error stands.
ck::TensorFile read_own_partition(const ck::CheckpointReader& reader, const std::string& file_name,
                                  zero::ZeroEngine& z, zero::ZeroEngine::PartitionState& state) {
  const uint64_t n = z.master_numel();
  state.master.assign(n, 0.0f);
  for (const std::string& name : z.optimizer_state_names()) state.optimizer.emplace_back(name, std::vector<float>(n));
  std::vector<ck::TensorDestination> into{{"fp32_flat_partition", ck::TensorDType::F32, state.master.data(), n}};
  for (auto& [name, values] : state.optimizer)
    into.push_back({"optimizer_state." + name, ck::TensorDType::F32, values.data(), n});
  try {
    return reader.read_tensor_file_into(file_name, into);
  } catch (const Error&) {
    const ck::TensorFile intact = reader.read_tensor_file(file_name);  // throws when damaged
    check_partition_numel(parse(intact.metadata_json(), intact.origin()), intact.origin(), n);
    throw;
  }
}

// A checkpoint of another world size or stage (DeepSpeed's universal checkpoint): every saved
// partition is laid back into full vectors, and this rank cuts its own partition from them.
zero::ZeroEngine::PartitionState load_recut(const ck::CheckpointReader& reader, int saved_world, int saved_stage,
                                           zero::ZeroEngine& z, models::DataLoader& loader) {
  const zero::ZeroLayout& layout = z.layout();
  const size_t numel = layout.numel();
  std::vector<float> full_master(numel);
  const std::vector<std::string> names = z.optimizer_state_names();
  std::vector<std::vector<float>> full_state(names.size(), std::vector<float>(numel));
  const int files = saved_stage == 0 ? 1 : saved_world;
  for (int r = 0; r < files; ++r) {
    const ck::TensorFile f = reader.read_tensor_file(ck::zero_optim_states_file_name(r, false));
    const uint64_t n = zero::ZeroEngine::partition_numel_of(layout, saved_stage, saved_world, r);
    std::vector<float> part(n);
    f.read("fp32_flat_partition", ck::TensorDType::F32, part.data(), n);
    zero::ZeroEngine::scatter_partition(layout, saved_stage, saved_world, r, part.data(), full_master.data());
    for (size_t k = 0; k < names.size(); ++k) {
      f.read("optimizer_state." + names[k], ck::TensorDType::F32, part.data(), n);
      zero::ZeroEngine::scatter_partition(layout, saved_stage, saved_world, r, part.data(), full_state[k].data());
    }
    if (r == 0) restore_rank_meta(parse(f.metadata_json(), f.origin()), f.origin(), z, loader);
  }
  zero::ZeroEngine::PartitionState mine;
  mine.master.assign(z.master_numel(), 0.0f);
  z.take_partition(full_master.data(), mine.master.data());
  for (size_t k = 0; k < names.size(); ++k) {
    mine.optimizer.emplace_back(names[k], std::vector<float>(z.master_numel()));
    z.take_partition(full_state[k].data(), mine.optimizer.back().second.data());
  }
  return mine;
}

}  // namespace

std::string load_training_checkpoint(const std::string& load_dir, const std::string& tag, Trainer& trainer,
                                     const models::Model& model, models::DataLoader& loader,
                                     comm::Communicator& comm) {
  const ck::CheckpointReader reader = ck::CheckpointReader::open(load_dir, tag);
  const std::string where = "checkpoint " + reader.directory();
  zero::ZeroEngine& z = trainer.zero();
  const ck::TensorFile states = reader.read_tensor_file(reader.model_states_file());
  const Json meta = parse(states.metadata_json(), states.origin());
  const int64_t saved_params = get_int(meta, "num_params", states.origin());
  if (saved_params != static_cast<int64_t>(model.num_params())) {
    throw Error(ErrorKind::Usage, where + " holds a model of " + std::to_string(saved_params) +
                                      " parameters; this run's has " + std::to_string(model.num_params()) +
                                      ". Use the same --model.");
  }
  const int saved_world = static_cast<int>(get_int(meta, "dp_world_size", states.origin()));
  const int saved_stage = static_cast<int>(get_int(meta, "zero_stage", states.origin()));
  if (reader.world_size() != saved_world) {
    throw Error(ErrorKind::Format, where + ": its manifest lists " + std::to_string(reader.world_size()) +
                                       " ranks but the model states say " + std::to_string(saved_world));
  }

  const auto& node = reader.manifest().node;
  if (node && (saved_world != comm.size() || saved_stage != z.stage())) {
    throw Error(ErrorKind::Usage, where + " lies on the nodes' own disks (node " + std::to_string(node->index) +
                                      " of " + std::to_string(node->count) + " here), saved by " +
                                      std::to_string(saved_world) + " ranks at ZeRO stage " + std::to_string(saved_stage) +
                                      ": it resumes only on the same ranks and stage. To change them, copy every "
                                      "node's tag directory into one and merge their manifests (docs/checkpoints.md)");
  }
  if (node && !reader.contains(ck::zero_optim_states_file_name(comm.rank(), false))) {
    throw Error(ErrorKind::Usage, where + " (node " + std::to_string(node->index) + " of the save) holds no files of rank " +
                                      std::to_string(comm.rank()) + ": start the ranks on the nodes that saved them, in "
                                      "the same order (the same hostfile)");
  }
  zero::ZeroEngine::PartitionState state;
  if (saved_world == comm.size() && saved_stage == z.stage()) {
    const ck::TensorFile mine = read_own_partition(reader, ck::zero_optim_states_file_name(comm.rank(), false), z, state);
    const Json part = parse(mine.metadata_json(), mine.origin());
    check_partition_numel(part, mine.origin(), z.master_numel());
    restore_rank_meta(part, mine.origin(), z, loader);
  } else {
    state = load_recut(reader, saved_world, saved_stage, z, loader);
  }
  z.load_partition(state);  // stages 1/2: an allgather, so every rank is here
  trainer.restore_counters(get_int(meta, "global_steps", states.origin()), get_int(meta, "skipped_steps", states.origin()),
                           get_int(meta, "micro_steps", states.origin()),
                           get_int(meta, "schedule_iteration", states.origin()));
  return reader.tag();
}

}  // namespace dsx::engine
