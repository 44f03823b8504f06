// Writes a TensorBoard event file, csv_monitor files and a 2-rank checkpoint into a directory, and
// prints the events it logged as JSON, for check_files_with_peers.py to read back with the real
// TensorBoard, DeepSpeed and safetensors (outside CI; they come from bench/peers/venv.sh).
#include <cstdio>
#include <string>
#include <vector>

#include "tests/checkpoint/checkpoint_test_util.h"
#include "engine/monitor/csv_monitor.h"
#include "engine/monitor/python_float.h"
#include "engine/monitor/tensorboard_monitor.h"

using namespace dsx::engine;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string out = argv[1];
  std::vector<monitor::Event> events;
  for (int step = 1; step <= 20; ++step) {
    const int64_t samples = step * 32;
    events.push_back({monitor::names::kTrainLoss, 6.0 / (1.0 + 0.1 * step), samples});
    events.push_back(
        {monitor::names::kLr, step < 5 ? 1e-4 * step : 5e-4 * (1.0 - step / 40.0), samples});
    events.push_back({monitor::names::kLossScale, step < 10 ? 65536.0 : 32768.0, samples});
    events.push_back({monitor::names::kStepMs, 10.0 + step * 0.125, samples});
  }
  {
    monitor::TensorBoardMonitor tb(out + "/tensorboard", "job");
    monitor::CsvMonitor csv(out + "/csv", "job");
    for (size_t i = 0; i < events.size(); i += 4) {
      std::span<const monitor::Event> batch(events.data() + i, 4);
      tb.write_events(batch);
      csv.write_events(batch);
    }
  }
  dsx::test::save_test_checkpoint(out + "/checkpoint", dsx::checkpoint::default_tag(7), 2, 7, 1000);

  std::printf("[");
  for (size_t i = 0; i < events.size(); ++i)
    std::printf("%s[\"%s\", %s, %lld]", i ? ", " : "", events[i].name.c_str(),
                monitor::python_float_repr(events[i].value).c_str(),
                static_cast<long long>(events[i].step));
  std::printf("]\n");
  return 0;
}
