// The ofi Communicator: provider choice, address exchange, and the mapping from operations to
// algorithms (see ofi_communicator.h).
#include "comm/ofi/ofi_communicator.h"

#include <net/if.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "comm/algorithms/algorithms.h"
#include "comm/ofi/device_staging.h"
#include "comm/ofi/ofi_transport.h"
#include "dsx/join.h"

namespace dsx::comm::ofi {

struct OfiCommunicator::Shared {
  std::shared_ptr<ProgressEngine> engine;
  std::shared_ptr<DeviceStaging> staging = std::make_shared<DeviceStaging>();
  std::unique_ptr<Store> store;  // the callers' side: group creation
  std::mutex mutex;
  std::map<std::string, int> groups_made;  // member list -> how many groups of it this rank made
  std::string prefix;                      // store keys of this world communicator
  int world_rank;

  ~Shared() {
    // The worker ends within the shutdown barrier's 30 s. If it does not, it is stuck inside the
    // provider with a dead peer: abandon the engine (never freed, so nothing it may still touch
    // goes away) instead of hanging this process in a join. It ends with the process.
    if (engine && !engine->stop(std::chrono::seconds(35))) new std::shared_ptr<ProgressEngine>(engine);
  }
};

namespace {

// Interface variables naming an interface that does not exist fail later with an obscure
// provider error; say so up front.
void check_interface_variables() {
  for (const char* var : {"FI_TCP_IFACE", "FI_SOCKETS_IFACE"}) {
    const char* name = std::getenv(var);
    if (name && *name && if_nametoindex(name) == 0) {
      throw Error(ErrorKind::Comm, std::string(var) + "='" + name + "' is not a network interface of this host - "
                                   "list them with `ip link` (use lo for one host, the cluster network's interface "
                                   "otherwise) or unset it");
    }
  }
}

std::string choose_provider(const Rendezvous& rv, const CommOptions& options) {
  if (!options.provider.empty()) return options.provider;
  const char* env = std::getenv("FI_PROVIDER");
  if (env && *env) return "";  // libfabric applies FI_PROVIDER itself
  std::set<std::string> hosts(rv.hosts().begin(), rv.hosts().end());
  if (hosts.size() == 1) return "shm";
  try {
    Endpoint probe("efa");
    return "efa";
  } catch (const Error&) {
    return "tcp";
  }
}

std::string elements(size_t count, DType dtype) {
  return std::string(kernels::dtype_name(dtype)) + ", " + std::to_string(count) + " elements";
}

}  // namespace

std::unique_ptr<Communicator> create_ofi_world(Rendezvous& rv, const CommOptions& options) {
  check_interface_variables();
  static std::atomic<int> instances{0};
  const std::string prefix = "ofi/" + std::to_string(instances++) + "/";
  Store& store = rv.store();
  const int rank = rv.rank(), world = rv.world_size();

  auto endpoint = std::make_unique<Endpoint>(choose_provider(rv, options), options.force_registration);
  const std::string provider = endpoint->traits().provider;
  store.set(prefix + "provider/" + std::to_string(rank), provider);
  store.set(prefix + "addr/" + std::to_string(rank), endpoint->address());
  auto timeout = store_timeout_from_environment();
  std::vector<std::string> addresses;
  for (int r = 0; r < world; ++r) {
    std::string theirs = get_from_peers(store, prefix + "provider/" + std::to_string(r), timeout);
    if (theirs != provider) {
      throw Error(ErrorKind::Comm, "rank " + std::to_string(rank) + " opened libfabric provider '" + provider +
                                       "' but rank " + std::to_string(r) + " opened '" + theirs +
                                       "' - set FI_PROVIDER (or the provider option) the same for every rank");
    }
    addresses.push_back(get_from_peers(store, prefix + "addr/" + std::to_string(r), timeout));
  }
  endpoint->insert_peers(addresses);

  auto shared = std::make_shared<OfiCommunicator::Shared>();
  shared->engine = std::make_shared<ProgressEngine>(std::move(endpoint), store.helper(), rank, world, options,
                                                    prefix + "closing");
  shared->store = store.helper();
  shared->prefix = prefix;
  shared->world_rank = rank;
  std::vector<int> members(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) members[static_cast<size_t>(r)] = r;
  return std::make_unique<OfiCommunicator>(std::move(shared), std::move(members), 0);
}

OfiCommunicator::OfiCommunicator(std::shared_ptr<Shared> shared, std::vector<int> members, uint32_t group_id)
    : shared_(std::move(shared)),
      members_(std::make_shared<const std::vector<int>>(std::move(members))),
      group_id_(group_id) {
  for (size_t i = 0; i < members_->size(); ++i) {
    if ((*members_)[i] == shared_->world_rank) rank_ = static_cast<int>(i);
  }
  open_segments();
}

// shm means every rank is on this host: try to share memory with the group's ranks (a
// collective step; every member constructs the group at the same point). new_group calls this
// holding shared_->mutex, which guards shared_->store.
void OfiCommunicator::open_segments() {
  const CommOptions& opt = shared_->engine->options();
  const std::string& provider = shared_->engine->endpoint().traits().provider;
  if (size() < 2 || provider.rfind("shm", 0) != 0) return;
  // Slots hold a chunk of every block: keep one round of a large group within 2 MiB.
  size_t chunk = std::min(opt.shared_memory_chunk_bytes, std::max<size_t>(64, (size_t{2} << 20) / static_cast<size_t>(size())));
  chunk = std::max<size_t>(64, chunk / 64 * 64);
  auto setup = HostSegments::open(*shared_->store, shared_->prefix + "shm/" + std::to_string(group_id_) + "/", rank_,
                                  size(), chunk, opt.shared_memory,
                                  "rank " + std::to_string(shared_->world_rank) + " has DSX_COMM_SHARED_MEMORY=0",
                                  store_timeout_from_environment());
  segments_ = std::move(setup.segments);
  static std::atomic<bool> said{false};
  if (!segments_ && opt.shared_memory && rank_ == 0 && !said.exchange(true)) {
    std::fprintf(stderr, "dsx: rank %d: collectives use the %s fabric, not shared memory: %s\n", shared_->world_rank,
                 provider.c_str(), setup.why_not.c_str());
  }
}

std::string OfiCommunicator::backend() const { return "ofi/" + shared_->engine->endpoint().traits().provider; }

WorkHandle OfiCommunicator::collective(const std::string& name, const std::string& detail, Body body,
                                       Attempt attempt) {
  uint32_t number = next_op_++;
  std::string description = name + " #" + std::to_string(number) + " (" + detail +
                            (group_id_ ? ", group " + std::to_string(group_id_) + " of " + std::to_string(size()) + " ranks" : "") + ")";
  auto work = std::make_shared<Work>(description, shared_->engine->options().timeout + std::chrono::seconds(30));
  // The task holds the group by value (the caller may drop this communicator meanwhile) and the
  // engine by pointer: the engine runs every queued task before it shuts down.
  ProgressEngine* engine = shared_->engine.get();
  auto transport = [engine, members = members_, rank = rank_, group = group_id_, number, description] {
    return OfiTransport(*engine, *members, rank, group, false, number,
                        OpInfo{description, Clock::now() + engine->options().timeout, members.get()});
  };
  auto task = [transport, body = std::move(body)] {
    OfiTransport t = transport();
    body(t);
  };
  if (attempt) {
    engine->attempt_then_submit(
        work,
        [&] {
          OfiTransport t = transport();
          return attempt(t);
        },
        std::move(task));
  } else {
    engine->submit(work, std::move(task));
  }
  return work;
}

WorkHandle OfiCommunicator::point_to_point(const std::string& name, int peer, uint32_t op_number,
                                           const std::string& detail, Body body) {
  std::string description = name + " #" + std::to_string(op_number) + " (" + detail + ", peer rank " +
                            std::to_string((*members_)[static_cast<size_t>(peer)]) + ")";
  auto work = std::make_shared<Work>(description, shared_->engine->options().timeout + std::chrono::seconds(30));
  shared_->engine->submit(work, [engine = shared_->engine.get(), members = members_, rank = rank_, group = group_id_, op_number,
                                 description, body = std::move(body)] {
    OfiTransport t(*engine, *members, rank, group, true, op_number,
                   OpInfo{description, Clock::now() + engine->options().timeout, members.get()});
    body(t);
  });
  return work;
}

static algorithms::Pipeline pipeline(const CommOptions& options) {
  algorithms::Pipeline pipe;
  pipe.chunk_bytes = options.chunk_bytes;
  return pipe;
}

// Each body sees host memory: device buffers are staged (device_staging.h).
WorkHandle OfiCommunicator::allreduce(void* data, size_t count, DType dtype, ReduceOp op) {
  const CommOptions& opt = shared_->engine->options();
  const size_t bytes = count * kernels::dtype_size(dtype);
  const bool small = bytes <= opt.small_bytes;
  if (segments_ && count > 0 && one_shot_fits(*segments_, bytes, opt.shared_memory_one_shot_bytes) &&
      !is_device_memory(data)) {
    return one_shot_allreduce(data, count, dtype, op);
  }
  return collective(std::string("allreduce ") + kernels::reduce_op_name(op), elements(count, dtype),
                    [=, staging = shared_->staging, segments = segments_](OfiTransport& t) {
                      HostView v(*staging, data, bytes, data, bytes);
                      if (segments) {
                        host_allreduce(*segments, t.keep_alive(), v.out(), count, dtype, op, opt.shared_memory_one_shot_bytes,
                                       opt.shared_memory_in_place_bytes);
                      } else if (small) {
                        algorithms::recursive_doubling_allreduce(t, v.out(), count, dtype, op);
                      } else {
                        algorithms::ring_allreduce(t, v.out(), count, dtype, op, pipeline(opt));
                      }
                      v.finish();
                    });
}

// Small host buffers over shared memory: posted from the caller's thread and, when the peers
// have posted too within a few microseconds, finished there - no hand-over to the worker.
WorkHandle OfiCommunicator::one_shot_allreduce(void* data, size_t count, DType dtype, ReduceOp op) {
  constexpr auto kPeersWithin = std::chrono::microseconds(20);
  const size_t bytes = count * kernels::dtype_size(dtype);
  auto posted = std::make_shared<bool>(false);  // by the attempt; read by the worker after it
  return collective(
      std::string("allreduce ") + kernels::reduce_op_name(op), elements(count, dtype),
      [=, segments = segments_](OfiTransport& t) {
        if (!*posted) {
          segments->wait_for_free_slot(segments->rounds_done, t.keep_alive());
          one_shot_post(*segments, data, bytes);
        }
        one_shot_finish(*segments, t.keep_alive(), data, count, dtype, op);
      },
      [=, segments = segments_](OfiTransport& t) {
        if (!one_shot_slot_free(*segments)) return false;
        one_shot_post(*segments, data, bytes);
        *posted = true;
        if (!one_shot_peers_posted(*segments, kPeersWithin)) return false;
        one_shot_finish(*segments, t.keep_alive(), data, count, dtype, op);
        return true;
      });
}

WorkHandle OfiCommunicator::reduce_scatter(const void* input, void* output, size_t count, DType dtype, ReduceOp op) {
  const CommOptions& opt = shared_->engine->options();
  const size_t bytes = count * kernels::dtype_size(dtype);
  return collective(std::string("reduce_scatter ") + kernels::reduce_op_name(op), elements(count, dtype) + " per rank",
                    [=, staging = shared_->staging, segments = segments_, p = size()](OfiTransport& t) {
                      HostView v(*staging, input, bytes * static_cast<size_t>(p), output, bytes);
                      if (segments) {
                        host_reduce_scatter(*segments, t.keep_alive(), v.in(), v.out(), count, dtype, op,
                                            opt.shared_memory_in_place_bytes);
                      } else {
                        algorithms::ring_reduce_scatter(t, v.in(), v.out(), count, dtype, op, pipeline(opt));
                      }
                      v.finish();
                    });
}

WorkHandle OfiCommunicator::allgather(const void* input, void* output, size_t count, DType dtype) {
  const CommOptions& opt = shared_->engine->options();
  const size_t bytes = count * kernels::dtype_size(dtype);
  return collective("allgather", elements(count, dtype) + " per rank",
                    [=, staging = shared_->staging, segments = segments_, p = size()](OfiTransport& t) {
                      HostView v(*staging, input, bytes, output, bytes * static_cast<size_t>(p));
                      if (segments) {
                        host_allgather(*segments, t.keep_alive(), v.in(), v.out(), bytes, opt.shared_memory_in_place_bytes);
                      } else {
                        algorithms::ring_allgather(t, v.in(), v.out(), count, dtype, pipeline(opt));
                      }
                      v.finish();
                    });
}

WorkHandle OfiCommunicator::broadcast(void* data, size_t count, DType dtype, int root) {
  check_peer(root, "broadcast root");
  const CommOptions& opt = shared_->engine->options();
  const size_t bytes = count * kernels::dtype_size(dtype);
  return collective("broadcast", elements(count, dtype) + " from rank " + std::to_string(root),
                    [=, staging = shared_->staging](OfiTransport& t) {
                      HostView v(*staging, data, bytes, data, bytes);
                      algorithms::chain_broadcast(t, v.out(), bytes, root, pipeline(opt));
                      v.finish();
                    });
}

WorkHandle OfiCommunicator::barrier() {
  return collective("barrier", std::to_string(size()) + " ranks", [](OfiTransport& t) { algorithms::dissemination_barrier(t); });
}

void OfiCommunicator::check_peer(int peer, const char* what) const {
  if (peer < 0 || peer >= size()) {
    throw Error(ErrorKind::Usage, std::string(what) + " " + std::to_string(peer) + " is not a rank of this group of " +
                                      std::to_string(size()));
  }
}

// The sequence number of the next message in one direction with `peer`: the n-th send to a peer
// matches its n-th recv from us, whichever threads issue them.
uint32_t OfiCommunicator::next_message_number(std::map<int, uint32_t>& counters, int peer) {
  std::lock_guard lock(p2p_mutex_);
  return counters[peer]++;
}

WorkHandle OfiCommunicator::send(const void* data, size_t count, DType dtype, int peer) {
  check_peer(peer, "send to rank");
  uint32_t number = next_message_number(sends_to_, peer);
  size_t bytes = count * kernels::dtype_size(dtype);
  return point_to_point("send", peer, number, elements(count, dtype), [=, staging = shared_->staging](OfiTransport& t) {
    HostView v(*staging, data, bytes, nullptr, 0);
    t.wait(t.send(peer, v.in(), bytes, 0));
  });
}

WorkHandle OfiCommunicator::recv(void* data, size_t count, DType dtype, int peer) {
  check_peer(peer, "recv from rank");
  uint32_t number = next_message_number(recvs_from_, peer);
  size_t bytes = count * kernels::dtype_size(dtype);
  return point_to_point("recv", peer, number, elements(count, dtype), [=, staging = shared_->staging](OfiTransport& t) {
    HostView v(*staging, nullptr, 0, data, bytes);
    t.wait(t.recv(peer, v.out(), bytes, 0));
    v.finish();
  });
}

std::unique_ptr<Communicator> OfiCommunicator::new_group(const std::vector<int>& ranks) {
  std::vector<int> world_ranks;
  std::set<int> seen;
  for (int r : ranks) {
    check_peer(r, "new_group member");
    if (!seen.insert(r).second) throw Error(ErrorKind::Usage, "new_group: rank " + std::to_string(r) + " is listed twice");
    world_ranks.push_back((*members_)[static_cast<size_t>(r)]);
  }
  if (!seen.count(rank_)) {
    throw Error(ErrorKind::Usage, "new_group: rank " + std::to_string(rank_) + " called it but is not in the list; "
                                  "only the members of a group create it");
  }
  // Members agree on a group id through the store: the first member draws it, the others read it.
  std::string list = join(world_ranks, ",");
  std::lock_guard lock(shared_->mutex);
  int nth = shared_->groups_made[list]++;
  std::string key = shared_->prefix + "group/" + list + "/" + std::to_string(nth);
  uint32_t id;
  if (world_ranks[0] == shared_->world_rank) {
    id = static_cast<uint32_t>(shared_->store->add(shared_->prefix + "groups", 1));
    if (id >= kMaxGroups) {
      throw Error(ErrorKind::Unsupported, "new_group: more than " + std::to_string(kMaxGroups - 1) +
                                              " groups on one communicator");
    }
    shared_->store->set(key, std::to_string(id));
  } else {
    id = static_cast<uint32_t>(std::stoul(shared_->store->get(key, store_timeout_from_environment())));
  }
  return std::make_unique<OfiCommunicator>(shared_, std::move(world_ranks), id);
}

}  // namespace dsx::comm::ofi
