// The monitors' files: csv_monitor's exact bytes (DeepSpeed's names, headers, CRLF rows, Python
// float text), TensorBoard event files parsed back by a small protobuf reader here with every CRC
// checked, the file name pattern, and MonitorMaster's rank-0-only fan-out and wandb/comet notes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>

#include "tests/checkpoint/checkpoint_test_util.h"
#include "dsx/error.h"
#include "engine/monitor/csv_monitor.h"
#include "engine/monitor/monitor_master.h"
#include "engine/monitor/python_float.h"
#include "engine/monitor/tensorboard_monitor.h"
#include "engine/monitor/tfrecord.h"
#include "tests/engine/test_files.h"

using dsx::test::read_all;

using namespace dsx::engine::monitor;
using dsx::test::TempDir;

namespace {

// --- A minimal protobuf reader for tensorboard.Event, independent of the writer's code. ---
struct Reader {
  std::string_view in;
  size_t pos = 0;
  bool done() const { return pos >= in.size(); }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b = static_cast<uint8_t>(in.at(pos++));
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) break;
    }
    return v;
  }
  template <typename T>
  T fixed() {
    T v;
    std::memcpy(&v, in.substr(pos, sizeof(T)).data(), sizeof(T));
    pos += sizeof(T);
    return v;
  }
  std::string_view bytes() {
    size_t n = varint();
    auto s = in.substr(pos, n);
    pos += n;
    return s;
  }
};

struct DecodedEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::string tag;
  float simple_value = NAN;
};

DecodedEvent decode_event(std::string_view bytes) {
  DecodedEvent e;
  Reader r{bytes};
  while (!r.done()) {
    uint64_t key = r.varint();
    switch (key) {
      case (1 << 3) | 1:
        e.wall_time = r.fixed<double>();
        break;
      case (2 << 3) | 0:
        e.step = static_cast<int64_t>(r.varint());
        break;
      case (3 << 3) | 2:
        e.file_version = std::string(r.bytes());
        break;
      case (5 << 3) | 2: {
        Reader summary{r.bytes()};
        while (!summary.done()) {
          EXPECT_EQ(summary.varint(), (1u << 3) | 2);  // Summary.value
          Reader value{summary.bytes()};
          while (!value.done()) {
            uint64_t vkey = value.varint();
            if (vkey == ((1 << 3) | 2))
              e.tag = std::string(value.bytes());
            else if (vkey == ((2 << 3) | 5))
              e.simple_value = value.fixed<float>();
            else
              ADD_FAILURE() << "unexpected Summary.Value field key " << vkey;
          }
        }
        break;
      }
      default:
        ADD_FAILURE() << "unexpected Event field key " << key;
        return e;
    }
  }
  return e;
}

std::string only_event_file(const std::string& dir) {
  std::string found;
  for (auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().starts_with("events.out.tfevents.")) {
      EXPECT_TRUE(found.empty()) << "two event files in " << dir;
      found = e.path().string();
    }
  return found;
}

}  // namespace

TEST(MonitorPythonFloat, PrintsAsPythonRepr) {
  const std::pair<double, const char*> cases[] = {
      {0.0001, "0.0001"},
      {1e-05, "1e-05"},
      {0.00012, "0.00012"},
      {65536.0, "65536.0"},
      {1e16, "1e+16"},
      {1.5e16, "1.5e+16"},
      {1e15, "1000000000000000.0"},
      {123456789012345.6, "123456789012345.6"},
      {0.1, "0.1"},
      {1.0 / 3, "0.3333333333333333"},
      {-2.5, "-2.5"},
      {100000.0, "100000.0"},
      {9.5367431640625e-07, "9.5367431640625e-07"},
      {5e-324, "5e-324"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {-0.0, "-0.0"},
      {0.0, "0.0"},
      {2.0, "2.0"},
      {1e22, "1e+22"},
      {123.456, "123.456"},
      {std::numeric_limits<double>::quiet_NaN(), "nan"},
      {std::numeric_limits<double>::infinity(), "inf"},
      {-std::numeric_limits<double>::infinity(), "-inf"},
  };
  for (auto [x, text] : cases) EXPECT_EQ(python_float_repr(x), text) << x;
}

TEST(MonitorPythonFloat, RoundsAsPythonRound) {
  EXPECT_EQ(python_round(2.675, 2), 2.67);  // the binary value is just below 2.675
  EXPECT_EQ(python_round(0.125, 2), 0.12);  // an exact half goes to even
  EXPECT_EQ(python_round(0.375, 2), 0.38);
  EXPECT_EQ(python_round(1.23456, 2), 1.23);
  EXPECT_EQ(python_float_repr(python_round(0.0, 2)), "0.0");
}

TEST(MonitorCsv, WritesDeepSpeedsFilesByteForByte) {
  TempDir tmp;
  {
    CsvMonitor csv(tmp.path(), "my_job");
    EXPECT_EQ(csv.log_dir(), tmp.path() + "/my_job");
    std::vector<Event> first = {{"Train/Samples/lr", 0.0001, 32},
                                {"Train/Samples/loss_scale", 65536.0, 32}};
    csv.write_events(first);
    std::vector<Event> second = {
        {"Train/Samples/lr", 1e-05, 64}, {"my metric", 0.5, 64}, {"Eval/acc, top1", 0.25, 64}};
    csv.write_events(second);
  }
  const std::string dir = tmp.path() + "/my_job/";
  EXPECT_EQ(read_all(dir + "Train_Samples_lr.csv"), "step,lr\r\n32,0.0001\r\n64,1e-05\r\n");
  EXPECT_EQ(read_all(dir + "Train_Samples_loss_scale.csv"), "step,loss_scale\r\n32,65536.0\r\n");
  EXPECT_EQ(read_all(dir + "my_metric.csv"), "step,my metric\r\n64,0.5\r\n");
  EXPECT_EQ(read_all(dir + "Eval_acc,_top1.csv"), "step,\"acc, top1\"\r\n64,0.25\r\n");
  // A second run (a resume) appends, with a header again, as DeepSpeed's monitor does.
  {
    CsvMonitor csv(tmp.path(), "my_job");
    std::vector<Event> more = {{"Train/Samples/lr", 2e-05, 96}};
    csv.write_events(more);
  }
  EXPECT_EQ(read_all(dir + "Train_Samples_lr.csv"),
            "step,lr\r\n32,0.0001\r\n64,1e-05\r\nstep,lr\r\n96,2e-05\r\n");
}

TEST(MonitorCsv, DirectoryIsOutputPathJoinedWithJobNameAsPythonJoins) {
  EXPECT_EQ(monitor_log_dir("", "DeepSpeedJobName"), "DeepSpeedJobName");
  EXPECT_EQ(monitor_log_dir("out/logs/", "job"), "out/logs/job");
  EXPECT_EQ(monitor_log_dir("out", "job"), "out/job");
  EXPECT_EQ(monitor_log_dir("out", "/abs/job"), "/abs/job");
}

TEST(MonitorCsv, UncreatableDirectoryIsAClearError) {
  TempDir tmp;
  std::ofstream(tmp.file("a_file")) << "x";
  try {
    CsvMonitor csv(tmp.file("a_file"), "job");
    FAIL() << "no error";
  } catch (const dsx::Error& e) {
    EXPECT_NE(std::string(e.what()).find(tmp.file("a_file") + "/job"), std::string::npos)
        << e.what();
  }
}

TEST(MonitorTensorBoard, EventFileParsesBackWithEveryCrcChecked) {
  TempDir tmp;
  const double before =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::string path;
  {
    TensorBoardMonitor tb(tmp.path(), "run1");
    path = tb.path();
    std::vector<Event> events = {{"Train/Samples/train_loss", 5.25, 8},
                                 {"Train/Samples/lr", 3e-4, 8}};
    tb.write_events(events);
    std::vector<Event> more = {{"Train/Samples/train_loss", 4.125, 16},
                               {"Train/Samples/elapsed_time_ms_step", 12.5, 1LL << 40}};
    tb.write_events(more);
  }
  EXPECT_EQ(only_event_file(tmp.path() + "/run1"), path);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::regex pattern(".*/run1/events\\.out\\.tfevents\\.[0-9]{10}\\." + std::string(host) + "\\." +
                     std::to_string(getpid()) + "\\.0");
  EXPECT_TRUE(std::regex_match(path, pattern)) << path;

  auto records = read_tfrecords(read_all(path), path);
  ASSERT_EQ(records.size(), 5u);
  DecodedEvent first = decode_event(records[0]);
  EXPECT_EQ(first.file_version, "brain.Event:2");
  EXPECT_GE(first.wall_time, std::floor(before));
  EXPECT_LT(first.wall_time, before + 60);
  const std::tuple<const char*, float, int64_t> expected[] = {
      {"Train/Samples/train_loss", 5.25f, 8},
      {"Train/Samples/lr", 3e-4f, 8},
      {"Train/Samples/train_loss", 4.125f, 16},
      {"Train/Samples/elapsed_time_ms_step", 12.5f, 1LL << 40}};
  for (int i = 0; i < 4; ++i) {
    DecodedEvent e = decode_event(records[i + 1]);
    EXPECT_EQ(e.tag, std::get<0>(expected[i]));
    EXPECT_EQ(e.simple_value, std::get<1>(expected[i]));
    EXPECT_EQ(e.step, std::get<2>(expected[i]));
    EXPECT_GE(e.wall_time, first.wall_time);
  }
}

TEST(MonitorTensorBoard, ReaderRefusesDamagedRecords) {
  std::string file;
  append_tfrecord(file, encode_file_version_event(1.0));
  append_tfrecord(file, encode_scalar_event("a", 1.0f, 1, 2.0));
  EXPECT_EQ(read_tfrecords(file, "f").size(), 2u);
  std::string flipped = file;
  flipped[flipped.size() - 6] ^= 0x10;  // inside the second record's data
  EXPECT_THROW(
      try { read_tfrecords(flipped, "f"); } catch (const dsx::Error& e) {
        EXPECT_NE(std::string(e.what()).find("bad data CRC"), std::string::npos) << e.what();
        throw;
      },
      dsx::Error);
  std::string cut = file.substr(0, file.size() - 3);
  EXPECT_THROW(
      try { read_tfrecords(cut, "f"); } catch (const dsx::Error& e) {
        EXPECT_NE(std::string(e.what()).find("is cut off"), std::string::npos) << e.what();
        throw;
      },
      dsx::Error);
  std::string bad_length = file;
  bad_length[0] ^= 0x01;
  EXPECT_THROW(read_tfrecords(bad_length, "f"), dsx::Error);
}

TEST(MonitorMaster, RankZeroWritesEveryEnabledMonitorAndNotesWandbAndComet) {
  TempDir tmp;
  MonitorSettings s;
  s.tensorboard = {true, tmp.path(), "tb_job"};
  s.csv_monitor = {true, tmp.path(), "csv_job"};
  s.wandb_enabled = true;
  s.comet_enabled = true;
  std::ostringstream notes;
  {
    MonitorMaster master(s, 0, notes);
    EXPECT_TRUE(master.enabled());
    EXPECT_EQ(master.log_dirs(),
              (std::vector<std::string>{tmp.path() + "/tb_job", tmp.path() + "/csv_job"}));
    std::vector<Event> events = {{"Train/Samples/lr", 0.001, 4}};
    master.write_events(events);
  }
  EXPECT_EQ(read_all(tmp.path() + "/csv_job/Train_Samples_lr.csv"), "step,lr\r\n4,0.001\r\n");
  auto records = read_tfrecords(read_all(only_event_file(tmp.path() + "/tb_job")), "tb");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(decode_event(records[1]).tag, "Train/Samples/lr");
  EXPECT_NE(notes.str().find("\"wandb\" monitor is enabled"), std::string::npos) << notes.str();
  EXPECT_NE(notes.str().find("\"comet\" monitor is enabled"), std::string::npos) << notes.str();
  EXPECT_NE(notes.str().find("Training goes on"), std::string::npos);
}

TEST(MonitorMaster, OtherRanksWriteNothing) {
  TempDir tmp;
  MonitorSettings s;
  s.csv_monitor = {true, tmp.path(), "csv_job"};
  s.wandb_enabled = true;
  std::ostringstream notes;
  MonitorMaster master(s, 1, notes);
  EXPECT_TRUE(master.enabled());
  std::vector<Event> events = {{"Train/Samples/lr", 0.001, 4}};
  master.write_events(events);
  EXPECT_FALSE(std::filesystem::exists(tmp.path() + "/csv_job"));
  EXPECT_TRUE(notes.str().empty());
  MonitorMaster none(MonitorSettings{}, 0, notes);
  EXPECT_FALSE(none.enabled());
}
