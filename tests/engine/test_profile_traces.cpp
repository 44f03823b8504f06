// `dsx train --profile`: real ranks write their timelines, and the tests read them back as a
// viewer would - well-formed JSON, spans nested on every track, each gradient bucket inside its
// step, reductions overlapping backward only with overlap_comm - and rank 0's summary names a
// rank slowed on purpose (stopped and continued by signals, as a noisy neighbour would) as the
// straggler.
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/comm/free_port.h"
#include "tests/models/temp_dir.h"
#include "tests/tools/run_command.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string read_file(const std::string& path) {
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  return text.str();
}

std::string config_file(const dsx::test::TempDir& dir, int stage, bool overlap) {
  const std::string path = dir.file("ds_config.json");
  std::ofstream(path) << R"({
    "train_micro_batch_size_per_gpu": 8,
    "gradient_accumulation_steps": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 2e-3}},
    "zero_optimization": {"stage": )" << stage << R"(, "overlap_comm": )" << (overlap ? "true" : "false")
                      << R"(, "reduce_bucket_size": 20000, "stage3_prefetch_bucket_size": 20000}
  })";
  return path;
}

// Ranks of `dsx train` started directly (as torchrun would), so the test knows each one's pid.
struct Job {
  std::vector<pid_t> pids;
  std::vector<std::string> logs;
  std::vector<int> exit_codes;

  Job(int world, const std::string& args, const dsx::test::TempDir& dir) {
    const std::string port = std::to_string(dsx::test::free_port());
    for (int r = 0; r < world; ++r) {
      logs.push_back(dir.file("rank" + std::to_string(r) + ".log"));
      const pid_t pid = fork();
      if (pid == 0) {
        setenv("RANK", std::to_string(r).c_str(), 1);
        setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
        setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
        setenv("LOCAL_WORLD_SIZE", std::to_string(world).c_str(), 1);
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        setenv("MASTER_PORT", port.c_str(), 1);
        setenv("FI_TCP_IFACE", "lo", 1);
        setenv("OMP_NUM_THREADS", "1", 1);
        const std::string command = std::string("exec ") + DSX_EXE + " train --progress plain --samples 0 " + args +
                                    " > " + logs.back() + " 2>&1";
        execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
        _exit(127);
      }
      pids.push_back(pid);
    }
    exit_codes.assign(pids.size(), -1);
  }
  ~Job() { kill_all(SIGKILL); }

  void kill_all(int signal) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (exit_codes[i] == -1) ::kill(pids[i], signal);
    }
    if (signal == SIGKILL) wait_all(std::chrono::seconds(10));
  }
  // Waits for every rank (killing them all when `limit` passes); true when all exited 0.
  bool wait_all(std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    for (;;) {
      bool running = false;
      for (size_t i = 0; i < pids.size(); ++i) {
        if (exit_codes[i] != -1) continue;
        int status = 0;
        if (waitpid(pids[i], &status, WNOHANG) == pids[i]) {
          exit_codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        } else {
          running = true;
        }
      }
      if (!running) break;
      if (Clock::now() > deadline) {
        for (size_t i = 0; i < pids.size(); ++i) {
          if (exit_codes[i] == -1) ::kill(pids[i], SIGKILL);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (int c : exit_codes) {
      if (c != 0) return false;
    }
    return true;
  }
  std::string output(int rank) const { return read_file(logs[static_cast<size_t>(rank)]); }
};

struct Span {
  std::string name, category, track;
  double begin = 0, end = 0;  // µs
};

// One rank's trace as a viewer reads it; fails the test on anything a viewer would reject.
struct Trace {
  std::vector<Span> spans;
  double clock_offset_us = 0, clock_uncertainty_us = 0;

  explicit Trace(const std::string& path, int rank) {
    rapidjson::Document doc;
    const std::string text = read_file(path);
    EXPECT_FALSE(doc.Parse(text.c_str()).HasParseError()) << path;
    if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("traceEvents")) return;
    std::map<int, std::string> tracks;
    for (const auto& e : doc["traceEvents"].GetArray()) {
      EXPECT_EQ(e["pid"].GetInt(), rank) << path;
      const std::string ph = e["ph"].GetString(), name = e["name"].GetString();
      if (ph == "M" && name == "thread_name") tracks[e["tid"].GetInt()] = e["args"]["name"].GetString();
      if (ph == "M" && name == "dsx_trace") {
        clock_offset_us = e["args"]["clock_offset_us"].GetDouble();
        clock_uncertainty_us = e["args"]["clock_uncertainty_us"].GetDouble();
      }
    }
    for (const auto& e : doc["traceEvents"].GetArray()) {
      if (std::string(e["ph"].GetString()) != "X") continue;
      const double ts = e["ts"].GetDouble(), dur = e["dur"].GetDouble();
      EXPECT_GE(dur, 0.0);
      const int tid = e["tid"].GetInt();
      EXPECT_TRUE(tracks.count(tid)) << "every track is named";
      spans.push_back({e["name"].GetString(), e["cat"].GetString(), tracks[tid], ts, ts + dur});
    }
  }

  std::vector<Span> on(const std::string& track) const {
    std::vector<Span> out;
    for (const Span& s : spans) {
      if (s.track == track) out.push_back(s);
    }
    return out;
  }
  std::vector<Span> steps() const {  // torch.profiler's step spans
    std::vector<Span> out;
    for (const Span& s : spans) {
      if (s.category == "user_annotation" && s.name.rfind("ProfilerStep#", 0) == 0) out.push_back(s);
    }
    return out;
  }
  std::vector<Span> category(const std::string& cat) const {
    std::vector<Span> out;
    for (const Span& s : spans) {
      if (s.category == cat) out.push_back(s);
    }
    return out;
  }
};

constexpr double kRounding = 0.01;  // µs: ts and dur are printed to 1 ns

// On one track spans either nest or follow each other, never partly overlap.
void expect_nested(const Trace& trace, const std::string& track) {
  std::vector<Span> spans = trace.on(track);
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
  });
  std::vector<Span> open;
  for (const Span& s : spans) {
    while (!open.empty() && open.back().end <= s.begin + kRounding) open.pop_back();
    if (!open.empty()) {
      EXPECT_LE(s.end, open.back().end + kRounding)
          << track << ": '" << s.name << "' starts inside '" << open.back().name << "' and ends after it";
    }
    open.push_back(s);
  }
}

bool inside_a_step(const Span& s, const std::vector<Span>& steps) {
  for (const Span& step : steps) {
    if (s.begin >= step.begin - kRounding && s.end <= step.end + kRounding) return true;
  }
  return false;
}

// Arguments of `dsx train` for byte-small at ZeRO stage 2, traced into dir/traces on
// torch.profiler's schedule "wait,warmup,active".
std::string traced_byte_small(const dsx::test::TempDir& dir, bool overlap, int steps,
                              const std::string& schedule) {
  return "--deepspeed_config " + config_file(dir, 2, overlap) + " --model byte-small --steps " +
         std::to_string(steps) + " --eval_interval 0 --profile " + dir.file("traces") +
         " --profile_schedule " + schedule;
}

// Rank r's timeline as the traced job above left it.
Trace rank_trace(const dsx::test::TempDir& dir, int rank) {
  return Trace(dir.file("traces/rank" + std::to_string(rank) + ".trace.json"), rank);
}

bool overlap(const Span& a, const Span& b) { return std::min(a.end, b.end) - std::max(a.begin, b.begin) > 1.0; }

std::vector<Span> backward_layers(const Trace& t) {
  std::vector<Span> out;
  for (const Span& s : t.category("layer")) {
    if (s.name.rfind("backward", 0) == 0) out.push_back(s);
  }
  return out;
}

TEST(ProfileTraces, EveryRanksTimelineIsWellFormedWithBucketsInsideStepsAndOverlapVisible) {
  dsx::test::TempDir dir;
  // byte-small: a layer's backward (about 1 ms) outlasts the scheduler's delay in waking the
  // communication stream's thread, so on two busy cores the overlap shows in every run.
  Job job(2, traced_byte_small(dir, /*overlap=*/true, 6, "1,1,3"), dir);
  ASSERT_TRUE(job.wait_all(std::chrono::seconds(240))) << job.output(0) << job.output(1);
  const std::string out = job.output(0);
  EXPECT_NE(out.find("trace of steps 3-5 over 2 rank(s), ms per step:"), std::string::npos) << out;
  EXPECT_NE(out.find("gradient communication hidden behind compute:"), std::string::npos) << out;
  for (int rank = 0; rank < 2; ++rank) {
    const Trace trace = rank_trace(dir, rank);
    for (const char* track : {"training", "gradient reductions", "comm progress"}) {
      EXPECT_FALSE(trace.on(track).empty()) << "rank " << rank << " has spans on " << track;
      expect_nested(trace, track);
    }
    const std::vector<Span> steps = trace.steps();
    ASSERT_EQ(steps.size(), 3u) << "the three active steps, the warm-up's thrown away";
    EXPECT_EQ(steps[0].name, "ProfilerStep#3");
    EXPECT_EQ(steps[2].name, "ProfilerStep#5");
    for (const char* phase : {"data", "forward", "backward", "optimizer step"}) {
      int n = 0;
      for (const Span& s : trace.category("phase")) n += s.name == phase;
      EXPECT_GE(n, 3) << phase;
    }
    EXPECT_EQ(backward_layers(trace).size() % 3, 0u);
    const std::vector<Span> buckets = trace.on("gradient reductions");
    for (const Span& b : buckets) {
      EXPECT_TRUE(inside_a_step(b, steps))
          << b.name << " at " << b.begin << " is outside every step";
    }
    int overlapping = 0;
    for (const Span& b : buckets) {
      for (const Span& l : backward_layers(trace)) overlapping += overlap(b, l);
    }
    EXPECT_GT(overlapping, 0) << "with overlap_comm the reductions run beside backward";
    // The optimizer's kernel as its stream ran it, on the device's track for that stream.
    int kernels = 0;
    for (const Span& s : trace.spans) {
      if (s.name != "optimizer kernel") continue;
      ++kernels;
      EXPECT_EQ(s.track.rfind("cpu ", 0), 0u) << s.track;
      EXPECT_TRUE(inside_a_step(s, steps));
    }
    EXPECT_EQ(kernels, 3) << "one per traced step";
    // Both ranks read one machine's clock: the measured offset is within its uncertainty.
    EXPECT_LE(std::abs(trace.clock_offset_us), trace.clock_uncertainty_us + 1.0);
  }
  // `dsx trace merge`: one file holding both ranks' spans, each rank its own process.
  auto merged = dsx::test::run_command(std::string(DSX_EXE) + " trace merge " + dir.file("traces"));
  ASSERT_EQ(merged.exit_code, 0) << merged.output;
  rapidjson::Document doc;
  ASSERT_FALSE(doc.Parse(read_file(dir.file("traces/all_ranks.trace.json")).c_str()).HasParseError());
  size_t spans[2] = {0, 0};
  for (const auto& e : doc["traceEvents"].GetArray()) {
    if (std::string(e["ph"].GetString()) == "X") ++spans[e["pid"].GetInt()];
  }
  for (int rank = 0; rank < 2; ++rank) {
    const Trace trace = rank_trace(dir, rank);
    EXPECT_EQ(spans[rank], trace.spans.size());
  }
  EXPECT_NE(merged.output.find(std::to_string(spans[0] + spans[1]) + " spans"), std::string::npos) << merged.output;
  auto empty = dsx::test::run_command(std::string(DSX_EXE) + " trace merge " + dir.path());
  EXPECT_NE(empty.exit_code, 0);
  EXPECT_NE(empty.output.find("no rank<r>.trace.json"), std::string::npos) << empty.output;
}

TEST(ProfileTraces, WithoutOverlapCommNoReductionOverlapsBackward) {
  dsx::test::TempDir dir;
  Job job(2, traced_byte_small(dir, /*overlap=*/false, 4, "1,1,2"), dir);
  ASSERT_TRUE(job.wait_all(std::chrono::seconds(240))) << job.output(0) << job.output(1);
  for (int rank = 0; rank < 2; ++rank) {
    const Trace trace = rank_trace(dir, rank);
    const std::vector<Span> buckets = trace.on("gradient reductions");
    ASSERT_GT(buckets.size(), 4u);
    for (const Span& b : buckets) {
      for (const Span& l : backward_layers(trace)) EXPECT_FALSE(overlap(b, l)) << b.name << " overlaps " << l.name;
    }
  }
}

TEST(ProfileTraces, StageThreeShowsItsGathersAndTheConfigBlockSwitchesTracingOn) {
  dsx::test::TempDir dir;
  const std::string config = dir.file("trace_config.json");
  std::ofstream(config) << R"({
    "train_micro_batch_size_per_gpu": 8,
    "optimizer": {"type": "Adam", "params": {"lr": 1e-3}},
    "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 20000, "stage3_param_persistence_threshold": 0},
    "trace": {"enabled": true, "output_path": ")" << dir.file("from_config") << R"(", "wait": 0, "warmup": 0,
              "active": 2}
  })";
  Job job(2, "--deepspeed_config " + config + " --steps 3", dir);
  ASSERT_TRUE(job.wait_all(std::chrono::seconds(240))) << job.output(0) << job.output(1);
  const Trace trace(dir.file("from_config/rank1.trace.json"), 1);
  EXPECT_EQ(trace.steps().size(), 2u);
  const std::vector<Span> gathers = trace.on("parameter gathers");
  ASSERT_FALSE(gathers.empty());
  bool prefetched = false;
  for (const Span& g : gathers) prefetched = prefetched || g.name.rfind("prefetch layer", 0) == 0;
  EXPECT_TRUE(prefetched) << "stage 3 prefetches the next layers";
  EXPECT_NE(job.output(0).find("trace of steps 1-2"), std::string::npos) << job.output(0);
}

TEST(ProfileTraces, ARankSlowedOnPurposeIsNamedTheStraggler) {
  dsx::test::TempDir dir;
  // A window of 60 steps (about half a second) averages over many stops.
  Job job(2, "--deepspeed_config " + config_file(dir, 2, true) + " --steps 64 --eval_interval 0 --profile " +
                 dir.file("traces") + " --profile_schedule 3,1,60",
          dir);
  // Rank 0 runs a sixth of the time: stopped 25 ms out of every 30, as a neighbour hogging its core would.
  // (Rank 0, not 1: rank 1 is the one left slightly behind in an undisturbed run on two cores.)
  std::atomic<bool> done{false};
  std::thread slow([&] {
    while (!done) {
      ::kill(job.pids[0], SIGSTOP);
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
      ::kill(job.pids[0], SIGCONT);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  const bool ok = job.wait_all(std::chrono::seconds(240));
  done = true;
  slow.join();
  ASSERT_TRUE(ok) << job.output(0) << job.output(1);
  const std::string out = job.output(0);
  EXPECT_NE(out.find("straggler: rank 0"), std::string::npos) << out;
  std::cout << out.substr(out.find("trace of steps"), 1200) << "\n";  // the margin, for the log
}

TEST(ProfileTraces, AKilledRunKeepsTheWindowsItSaved) {
  dsx::test::TempDir dir;
  Job job(2, "--deepspeed_config " + config_file(dir, 2, true) + " --steps 100000 --profile " +
                 dir.file("traces") + " --profile_schedule 0,0,2,0",
          dir);
  const std::string path = dir.file("traces/rank1.trace.json");
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (!std::filesystem::exists(path) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a few more windows, and kill in one
  job.kill_all(SIGKILL);
  ASSERT_TRUE(std::filesystem::exists(path));
  const Trace trace(path, 1);
  EXPECT_GE(trace.steps().size(), 2u);
  expect_nested(trace, "training");
}

TEST(ProfileTraces, BadScheduleAndScheduleWithoutProfileAreRefusedBeforeTraining) {
  dsx::test::TempDir dir;
  const std::string base = std::string(DSX_EXE) + " train --deepspeed_config " + config_file(dir, 0, false) +
                           " --steps 2 --samples 0 --progress plain";
  auto bad = dsx::test::run_command(base + " --profile " + dir.file("t") + " --profile_schedule 1,x,3");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--profile_schedule '1,x,3': 'x' is not a whole number"), std::string::npos) << bad.output;
  auto alone = dsx::test::run_command(base + " --profile_schedule 1,1,3");
  EXPECT_NE(alone.exit_code, 0);
  EXPECT_NE(alone.output.find("--profile_schedule needs --profile DIR"), std::string::npos) << alone.output;
}

}  // namespace
