// `dsx bench <what>`: benchmarks a user runs on their own machines. Each verb is one function in
// the table below; `comm` measures the communicator like nccl-tests' *_perf binaries: per size
// the time of one operation, algorithm bandwidth (bytes / time) and bus bandwidth (algbw times
// nccl-tests' factor, comparable to one link's peak whatever the rank count), and a check of
// the result. It runs under `dsx launch` or with RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT
// set by hand; rank 0 prints.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <vector>

#include "comm/host_memory.h"
#include "comm/session.h"
#include "kernels/dtype.h"
#include "tools/cli.h"

namespace dsx::tools {

namespace {

using comm::Communicator;
using comm::DType;
using comm::ReduceOp;

enum class Collective { AllReduce, ReduceScatter, AllGather, Broadcast };

struct BenchSettings {
  Collective op;
  DType dtype;
  ReduceOp redop;
  int root;
  int iters, warmup, check;
  int blocking = 0;  // 1: wait for each operation before issuing the next (nccl-tests' -z 1)
};

Collective parse_collective(const std::string& name) {
  if (name == "allreduce" || name == "all_reduce") return Collective::AllReduce;
  if (name == "reduce_scatter" || name == "reducescatter") return Collective::ReduceScatter;
  if (name == "allgather" || name == "all_gather") return Collective::AllGather;
  if (name == "broadcast") return Collective::Broadcast;
  throw Error(ErrorKind::Usage, "dsx bench comm: unknown --op '" + name +
                                    "' (choose allreduce, reduce_scatter, allgather or broadcast)");
}

const char* collective_name(Collective op) {
  switch (op) {
    case Collective::AllReduce: return "allreduce";
    case Collective::ReduceScatter: return "reduce_scatter";
    case Collective::AllGather: return "allgather";
    case Collective::Broadcast: return "broadcast";
  }
  return "?";
}

DType parse_dtype(const std::string& name) {
  if (name == "fp32" || name == "float" || name == "float32") return DType::F32;
  if (name == "fp16" || name == "half" || name == "float16") return DType::F16;
  if (name == "bf16" || name == "bfloat16") return DType::BF16;
  throw Error(ErrorKind::Usage, "dsx bench comm: unknown --datatype '" + name + "' (choose fp32, fp16 or bf16)");
}

ReduceOp parse_redop(const std::string& name) {
  if (name == "sum") return ReduceOp::Sum;
  if (name == "avg") return ReduceOp::Avg;
  if (name == "max") return ReduceOp::Max;
  if (name == "min") return ReduceOp::Min;
  throw Error(ErrorKind::Usage, "dsx bench comm: unknown --redop '" + name + "' (choose sum, avg, max or min)");
}

// nccl-tests' bus-bandwidth factors (doc/PERFORMANCE.md).
double bus_factor(Collective op, int n) {
  if (n == 1) return 1.0;
  switch (op) {
    case Collective::AllReduce: return 2.0 * (n - 1) / n;
    case Collective::ReduceScatter:
    case Collective::AllGather: return static_cast<double>(n - 1) / n;
    case Collective::Broadcast: return 1.0;
  }
  return 1.0;
}

// Small integers, so every order of reduction gives the same exact result in every dtype.
float pattern(int rank, size_t i) { return static_cast<float>(static_cast<int>((rank * 5 + i * 3) % 11) - 5); }

void store_value(DType t, void* base, size_t i, float v) {
  if (t == DType::F32) {
    std::memcpy(static_cast<char*>(base) + 4 * i, &v, 4);
    return;
  }
  uint16_t h = t == DType::F16 ? kernels::float_to_fp16(v) : kernels::float_to_bf16(v);
  std::memcpy(static_cast<char*>(base) + 2 * i, &h, 2);
}

float load_value(DType t, const void* base, size_t i) {
  if (t == DType::F32) {
    float v;
    std::memcpy(&v, static_cast<const char*>(base) + 4 * i, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, static_cast<const char*>(base) + 2 * i, 2);
  return t == DType::F16 ? kernels::fp16_to_float(h) : kernels::bf16_to_float(h);
}

float expected_reduction(const BenchSettings& s, int n, size_t i) {
  float acc = pattern(0, i);
  for (int r = 1; r < n; ++r) {
    float v = pattern(r, i);
    acc = s.redop == ReduceOp::Max ? std::max(acc, v) : s.redop == ReduceOp::Min ? std::min(acc, v) : acc + v;
  }
  if (s.redop == ReduceOp::Avg) acc *= 1.0f / static_cast<float>(n);
  // Round like the buffer's dtype does.
  char tmp[4];
  store_value(s.dtype, tmp, 0, acc);
  return load_value(s.dtype, tmp, 0);
}

// A benchmark buffer: from allocate_shared_host, as the engine's gradient buffers are (peers on
// this host read it in place, like nccl-tests -R with NCCL's registered buffers), or ordinary
// memory (what an arbitrary caller passes).
class BenchBuffer {
 public:
  BenchBuffer(size_t bytes, bool shared) : plain_(shared ? 0 : bytes) {
    if (shared) shared_.reset(static_cast<char*>(comm::allocate_shared_host(bytes)));
  }
  char* data() { return shared_ ? shared_.get() : plain_.data(); }

 private:
  struct Free {
    void operator()(char* p) const { comm::free_shared_host(p); }
  };
  std::vector<char> plain_;
  std::unique_ptr<char, Free> shared_;
};

// One size: `bytes` as nccl-tests counts it (the whole array for reduce_scatter / allgather).
class SizeRun {
 public:
  SizeRun(Communicator& comm, const BenchSettings& s, char* a, char* b, size_t bytes)
      : comm_(comm), s_(s), a_(a), b_(b), n_(comm.size()), esize_(kernels::dtype_size(s.dtype)) {
    count_ = bytes / esize_;
    if (s.op == Collective::ReduceScatter || s.op == Collective::AllGather) per_rank_ = count_ / static_cast<size_t>(n_);
  }
  size_t count() const { return count_; }

  comm::WorkHandle issue() {
    switch (s_.op) {
      case Collective::AllReduce: return comm_.allreduce(a_, count_, s_.dtype, s_.redop);
      case Collective::ReduceScatter: return comm_.reduce_scatter(a_, b_, per_rank_, s_.dtype, s_.redop);
      case Collective::AllGather: return comm_.allgather(a_, b_, per_rank_, s_.dtype);
      case Collective::Broadcast: return comm_.broadcast(a_, count_, s_.dtype, s_.root);
    }
    return nullptr;
  }

  // Fills the inputs, runs once, and counts the elements that differ from the serial answer.
  size_t check() {
    int r = comm_.rank();
    size_t inputs = s_.op == Collective::AllGather ? per_rank_ : count_;
    for (size_t i = 0; i < inputs; ++i) {
      store_value(s_.dtype, a_, i, s_.op == Collective::Broadcast && r != s_.root ? 0.0f : pattern(r, i));
    }
    issue()->wait();
    size_t wrong = 0;
    switch (s_.op) {
      case Collective::AllReduce:
        for (size_t i = 0; i < count_; ++i) wrong += load_value(s_.dtype, a_, i) != expected_reduction(s_, n_, i);
        break;
      case Collective::ReduceScatter:
        for (size_t i = 0; i < per_rank_; ++i) {
          wrong += load_value(s_.dtype, b_, i) != expected_reduction(s_, n_, static_cast<size_t>(r) * per_rank_ + i);
        }
        break;
      case Collective::AllGather:
        for (size_t i = 0; i < count_; ++i) {
          wrong += load_value(s_.dtype, b_, i) != pattern(static_cast<int>(i / per_rank_), i % per_rank_);
        }
        break;
      case Collective::Broadcast:
        for (size_t i = 0; i < count_; ++i) wrong += load_value(s_.dtype, a_, i) != pattern(s_.root, i);
        break;
    }
    return wrong;
  }

  // Seconds per operation: `iters` operations in flight, then wait for all (with --blocking 1,
  // each waited for before the next is issued, as a blocking MPI_Allreduce does); the slowest
  // rank's.
  double time() {
    for (int i = 0; i < s_.warmup; ++i) issue()->wait();
    comm_.barrier()->wait();
    auto start = std::chrono::steady_clock::now();
    std::vector<comm::WorkHandle> works;
    for (int i = 0; i < s_.iters; ++i) {
      works.push_back(issue());
      if (s_.blocking) works.back()->wait();
    }
    // Operations complete in issue order: wait for the last (one wake-up, as nccl-tests
    // synchronises its stream once), then collect the others' errors, if any.
    works.back()->wait();
    for (auto& w : works) w->wait();
    float seconds = std::chrono::duration<float>(std::chrono::steady_clock::now() - start).count() / static_cast<float>(s_.iters);
    comm_.allreduce(&seconds, 1, DType::F32, ReduceOp::Max)->wait();
    return seconds;
  }

 private:
  Communicator& comm_;
  const BenchSettings& s_;
  char* a_;
  char* b_;
  int n_;
  size_t esize_, count_ = 0, per_rank_ = 0;
};

// `dsx bench comm`'s flags as given, before they are checked.
struct CommBenchFlags {
  std::string op_name, min_text, max_text, dtype_name, redop_name, backend, provider;
  double factor = 2;
  BenchSettings settings{};
  int timeout_s = 0;
  size_t chunk_bytes = 0, small_bytes = 0, shm_chunk_bytes = 0, shm_one_shot_bytes = 0;
  int shared_buffers = 1;
};

po::options_description comm_bench_options(CommBenchFlags& f) {
  po::options_description options("dsx bench comm (nccl-tests style; sizes in bytes, K/M/G suffixes allowed)");
  options.add_options()
      ("op", po::value(&f.op_name)->default_value("allreduce"), "allreduce, reduce_scatter, allgather or broadcast")
      ("minbytes,b", po::value(&f.min_text)->default_value("4K"), "smallest size")
      ("maxbytes,e", po::value(&f.max_text)->default_value("64M"), "largest size")
      ("stepfactor,f", po::value(&f.factor)->default_value(2), "multiply the size by this between rows")
      ("iters,n", po::value(&f.settings.iters)->default_value(20), "timed operations per size")
      ("warmup_iters,w", po::value(&f.settings.warmup)->default_value(5), "untimed operations per size first")
      ("check,c", po::value(&f.settings.check)->default_value(1), "check the result (0: skip, prints N/A)")
      ("blocking,z", po::value(&f.settings.blocking)->default_value(0),
       "1: wait for each operation before the next (as a blocking MPI call); 0: all in flight, wait once")
      ("datatype,d", po::value(&f.dtype_name)->default_value("fp32"), "fp32, fp16 or bf16")
      ("redop,o", po::value(&f.redop_name)->default_value("sum"), "sum, avg, max or min")
      ("root,r", po::value(&f.settings.root)->default_value(0), "broadcast root")
      ("shared-buffers,R", po::value(&f.shared_buffers)->default_value(1),
       "1: buffers from dsx's shared host memory, read in place by peers on this host (as the engine's); "
       "0: ordinary memory")
      ("backend", po::value(&f.backend)->default_value(""), "ofi, nccl or auto (default: DSX_COMM_BACKEND, else auto)")
      ("provider", po::value(&f.provider)->default_value(""), "ofi provider: shm, tcp, efa (default: FI_PROVIDER, else automatic)")
      ("timeout", po::value(&f.timeout_s)->default_value(0), "seconds one operation may wait for a peer (default: DSX_COMM_TIMEOUT or 300)")
      ("chunk-bytes", po::value(&f.chunk_bytes)->default_value(0), "ring pipeline chunk (default 512 KiB)")
      ("small-bytes", po::value(&f.small_bytes)->default_value(0), "largest allreduce done by recursive doubling (default 64 KiB)")
      ("shm-chunk-bytes", po::value(&f.shm_chunk_bytes)->default_value(0), "shared-memory collectives' round, per block (default 64 KiB)")
      ("shm-one-shot-bytes", po::value(&f.shm_one_shot_bytes)->default_value(0), "largest shared-memory allreduce done in one step (default 64 KiB)");
  return options;
}

// The environment's communicator settings with the flags given on top.
comm::CommOptions comm_options(const CommBenchFlags& f) {
  comm::CommOptions copts = comm::comm_options_from_environment();
  if (!f.backend.empty()) copts.backend = f.backend;
  if (!f.provider.empty()) copts.provider = f.provider;
  if (f.timeout_s > 0) copts.timeout = std::chrono::seconds(f.timeout_s);
  if (f.chunk_bytes) copts.chunk_bytes = f.chunk_bytes;
  if (f.small_bytes) copts.small_bytes = f.small_bytes;
  if (f.shm_chunk_bytes) copts.shared_memory_chunk_bytes = f.shm_chunk_bytes;
  if (f.shm_one_shot_bytes) copts.shared_memory_one_shot_bytes = f.shm_one_shot_bytes;
  return copts;
}

void print_comm_header(const BenchSettings& s, Communicator& comm, bool shared_buffers) {
  std::printf("# dsx bench comm: %s, %s, %s, %d ranks, backend %s, %d iterations after %d warm-up, %s, %s buffers\n",
              collective_name(s.op), kernels::dtype_name(s.dtype), kernels::reduce_op_name(s.redop), comm.size(),
              comm.backend().c_str(), s.iters, s.warmup, s.blocking ? "each waited for" : "all in flight",
              shared_buffers ? "shared" : "ordinary");
  std::printf("#%13s %12s %6s %6s %12s %12s %12s %8s\n", "size(B)", "count", "type", "redop", "time(us)",
              "algbw(GB/s)", "busbw(GB/s)", "#wrong");
}

// What the footer sums over the rows.
struct CommBenchTotals {
  double busbw_sum = 0;
  int rows = 0;
  size_t wrong = 0;  // over all ranks
};

// One row: checks and times `bytes` on every rank; rank 0 (`printer`) prints it.
void measure_size(Communicator& comm, const BenchSettings& s, BenchBuffer& a, BenchBuffer& b, size_t bytes,
                  bool printer, CommBenchTotals& totals) {
  SizeRun run(comm, s, a.data(), b.data(), bytes);
  size_t wrong = 0;
  for (int c = 0; c < s.check; ++c) wrong += run.check();
  float wrong_all = static_cast<float>(wrong);
  comm.allreduce(&wrong_all, 1, DType::F32, ReduceOp::Sum)->wait();
  double seconds = run.time();
  double algbw = static_cast<double>(bytes) / seconds / 1e9;
  double busbw = algbw * bus_factor(s.op, comm.size());
  totals.busbw_sum += busbw;
  ++totals.rows;
  totals.wrong += static_cast<size_t>(wrong_all);
  if (printer) {
    char wrong_text[16];
    if (s.check) std::snprintf(wrong_text, sizeof(wrong_text), "%zu", static_cast<size_t>(wrong_all));
    std::printf("%14zu %12zu %6s %6s %12.2f %12.3f %12.3f %8s\n", bytes, run.count(), kernels::dtype_name(s.dtype),
                kernels::reduce_op_name(s.redop), seconds * 1e6, algbw, busbw, s.check ? wrong_text : "N/A");
    std::fflush(stdout);
  }
}

int run_bench_comm(int argc, char** argv) {
  CommBenchFlags f;
  po::options_description options = comm_bench_options(f);
  auto args = parse_args(argc, argv, "dsx bench comm [options]   (one process per rank)", options);
  if (args.help) return 0;

  BenchSettings& s = f.settings;
  const size_t min_bytes = parse_byte_size(f.min_text, "dsx bench comm: --minbytes");
  const size_t max_bytes = parse_byte_size(f.max_text, "dsx bench comm: --maxbytes");
  if (min_bytes > max_bytes) throw Error(ErrorKind::Usage, "dsx bench comm: --minbytes is larger than --maxbytes");
  if (f.factor <= 1.0) throw Error(ErrorKind::Usage, "dsx bench comm: --stepfactor must be above 1");
  if (s.iters < 1 || s.warmup < 0) throw Error(ErrorKind::Usage, "dsx bench comm: --iters must be >= 1 and --warmup_iters >= 0");
  s.op = parse_collective(f.op_name);
  s.dtype = parse_dtype(f.dtype_name);
  s.redop = parse_redop(f.redop_name);

  comm::Session session(comm::rank_env_from_environment(), comm_options(f));
  Communicator& comm = session.world();
  const int n = comm.size();
  if (s.root < 0 || s.root >= n) throw Error(ErrorKind::Usage, "dsx bench comm: --root is not a rank of the world");
  const size_t esize = kernels::dtype_size(s.dtype);
  const size_t unit = esize * static_cast<size_t>(n);  // every size divides evenly among the ranks

  BenchBuffer a(max_bytes + unit, f.shared_buffers != 0), b(max_bytes + unit, f.shared_buffers != 0);
  bool printer = comm.rank() == 0;
  if (printer) print_comm_header(s, comm, f.shared_buffers != 0);
  CommBenchTotals totals;
  for (double size = static_cast<double>(min_bytes); size <= static_cast<double>(max_bytes) * 1.0001; size *= f.factor) {
    measure_size(comm, s, a, b, std::max(unit, static_cast<size_t>(size) / unit * unit), printer, totals);
  }
  if (printer) {
    std::printf("# Out of bounds values : %zu %s\n", totals.wrong, totals.wrong ? "FAILED" : "OK");
    std::printf("# Avg bus bandwidth    : %.3f GB/s\n", totals.rows ? totals.busbw_sum / totals.rows : 0.0);
  }
  return totals.wrong ? 1 : 0;
}

struct BenchVerb {
  const char* name;
  const char* summary;
  int (*run)(int, char**);
};

// Benchmarks by name; add a line (and a function) for a new one.
constexpr std::array kVerbs = {
    BenchVerb{"comm", "collectives like nccl-tests: size, time, algbw, busbw, correctness", run_bench_comm},
};

}  // namespace

int run_bench(int argc, char** argv) {
  std::string verb = argc > 1 ? argv[1] : "";
  for (const auto& v : kVerbs) {
    if (verb != v.name) continue;
    std::string prog = std::string(argv[0]) + " " + v.name;
    argv[1] = prog.data();
    return v.run(argc - 1, argv + 1);
  }
  std::ostream& out = verb.empty() || verb == "--help" || verb == "-h" ? std::cout : std::cerr;
  out << "usage: dsx bench <what> [options]     dsx bench <what> --help for its options\n\n";
  for (const auto& v : kVerbs) out << "  " << v.name << "    " << v.summary << "\n";
  if (verb == "--help" || verb == "-h") return 0;
  if (!verb.empty()) std::cerr << "\ndsx bench: unknown benchmark '" << verb << "'\n";
  return 2;
}

}  // namespace dsx::tools
