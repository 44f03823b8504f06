// What a user sees while training: DeepSpeed's step= and throughput lines (the throughput numbers
// checked against DeepSpeed's own ThroughputTimer run on the same scripted clock), the terminal
// bar rendered at many widths, plain lines for logs, the summary, and the live display on a real
// pseudo-terminal (openpty) and on a pipe.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pty.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <regex>
#include <string>

#include "engine/progress/progress_display.h"
#include "engine/progress/step_log.h"

using namespace dsx::engine::progress;

namespace {

std::string drain(int fd) {
  std::string out;
  char buf[4096];
  int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size())
    s.replace(p, from.size(), to);
}

// A pseudo-terminal `columns` wide in raw mode (no "\n" -> "\r\n" translation: the master reads
// exactly what was written to the slave). False when none can be opened.
bool open_raw_pty(unsigned short columns, int& master, int& slave) {
  winsize size{};
  size.ws_col = columns;
  size.ws_row = 24;
  if (openpty(&master, &slave, nullptr, nullptr, &size) != 0) return false;
  termios raw{};
  tcgetattr(slave, &raw);
  cfmakeraw(&raw);
  tcsetattr(slave, TCSANOW, &raw);
  return true;
}

}  // namespace

TEST(ProgressStepLog, DeepSpeedsStepLine) {
  std::vector<GroupState> adam = {{0.0001, {0.9, 0.999}}};
  EXPECT_EQ(format_step_line(10, 0, adam), "step=10, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]");
  std::vector<GroupState> two = {{6e-05, {0.9, 0.95}}, {1e-05, {0.9, 0.95}}};
  EXPECT_EQ(format_step_line(200, 3, two),
            "step=200, skipped=3, lr=[6e-05, 1e-05], mom=[(0.9, 0.95), (0.9, 0.95)]");
  std::vector<GroupState> sgd = {{0.1, {0.9}}};
  EXPECT_EQ(format_step_line(1, 0, sgd), "step=1, skipped=0, lr=[0.1], mom=[0.9]");
}

TEST(ProgressStepLog, PrefixLooksLikeDeepSpeedsLogging) {
  std::string prefix = log_prefix(std::chrono::system_clock::now(), 0);
  EXPECT_TRUE(std::regex_match(
      prefix,
      std::regex(R"(\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] \[INFO\] \[dsx\] \[Rank 0\] )")))
      << prefix;
}

TEST(ProgressThroughputTimer, MatchesDeepSpeedOnAScriptedClock) {
  // The same script run through deepspeed.utils.timer.ThroughputTimer (v0.19.8, time.time
  // patched): batch 8, steps_per_output 2, two micro-steps per optimizer step; micro-step m of
  // optimizer step g starts at 100 + g + 0.3 m and lasts 0.125 g seconds; an epoch ends after 4.
  ThroughputTimer timer(8, 2);
  std::vector<std::string> lines;
  for (int g = 1; g <= 6; ++g) {
    for (int m = 0; m < 2; ++m) {
      double t = 100 + g + 0.3 * m;
      timer.start(t);
      if (auto line = timer.stop(t + 0.125 * g, m == 1, true, 0.5512, 0.5549))
        lines.push_back(*line);
    }
    if (g == 4) timer.update_epoch_count();
  }
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            "epoch=0/micro_step=8/global_step=4, RunningAvgSamplesPerSec=9.142857142857142, "
            "CurrSamplesPerSec=7.9999920000080005, MemAllocated=0.55GB, MaxMemAllocated=0.55GB");
  EXPECT_EQ(lines[1],
            "epoch=1/micro_step=4/global_step=6, RunningAvgSamplesPerSec=7.111111111111111, "
            "CurrSamplesPerSec=5.333329777780149, MemAllocated=0.55GB, MaxMemAllocated=0.55GB");
  EXPECT_DOUBLE_EQ(timer.avg_samples_per_sec(), 7.111111111111111);
  ThroughputTimer never(8, std::nullopt);
  never.start(1);
  EXPECT_FALSE(never.stop(2, true, true));
  EXPECT_EQ(ThroughputTimer(8, 1).avg_samples_per_sec(), -std::numeric_limits<double>::infinity());
}

TEST(ProgressRender, TerminalLineExactly) {
  ProgressState s{370, 1000, 2.34567, 3e-4, 12345, 62, 83};
  EXPECT_EQ(render_terminal_line(s, 80, false),
            " 37% |######           | 370/1000 loss 2.3457 lr 3.00e-04 12.3k tok/s ETA 1m23s");
  EXPECT_EQ(render_terminal_line(s, 80, true),
            " 37% |██████▎          | 370/1000 loss 2.3457 lr 3.00e-04 12.3k tok/s ETA 1m23s");
  EXPECT_EQ(display_width(render_terminal_line(s, 80, true)), 79);  // 0.37 of 17 cells: 6 and 2/8
  ProgressState unknown{5, 0, 1.0, 1e-3, 0, 1, std::nullopt};
  EXPECT_EQ(render_terminal_line(unknown, 80, true),
            "5 steps loss 1.0000 lr 1.00e-03 0 tok/s ETA --");
}

TEST(ProgressRender, TerminalLineFitsEveryWidth) {
  ProgressState s{999, 1000, 12.5, 1e-5, 2.5e6, 3600, 4};
  for (int width = 1; width <= 240; ++width) {
    for (bool unicode : {false, true}) {
      std::string line = render_terminal_line(s, width, unicode);
      ASSERT_LE(display_width(line), std::max(width - 1, 1)) << width << ": " << line;
      if (width >= 100) {
        EXPECT_EQ(display_width(line), width - 1) << "the bar fills the line";
      }
    }
  }
  ProgressState done{1000, 1000, 1, 1, 1, 1, 0};
  EXPECT_EQ(render_terminal_line(done, 80, false),
            "100% |#######################| 1000/1000 loss 1.0000 lr 1.00e+00 1 tok/s ETA 0s");
  // Too narrow for a bar: whole parts are dropped from the end, never cut in the middle.
  EXPECT_EQ(render_terminal_line(done, 50, false),
            "100%  1000/1000 loss 1.0000 lr 1.00e+00 1 tok/s");
  EXPECT_EQ(render_terminal_line(done, 30, false), "100%  1000/1000 loss 1.0000");
  EXPECT_EQ(render_terminal_line(done, 8, false), "100% 10");
}

TEST(ProgressRender, PlainLineAndUnits) {
  ProgressState s{370, 1000, 2.34567, 3e-4, 12345, 62, 83};
  EXPECT_EQ(
      render_plain_line(s),
      "step 370/1000 | loss 2.3457 | lr 3.000e-04 | 12.3k tokens/s | elapsed 1m02s | ETA 1m23s");
  EXPECT_EQ(format_duration(59.4), "59s");
  EXPECT_EQ(format_duration(3599), "59m59s");
  EXPECT_EQ(format_duration(7380), "2h03m");
  EXPECT_EQ(format_duration(3 * 86400 + 4 * 3600), "3d04h");
  EXPECT_EQ(format_duration(-1), "--");
  EXPECT_EQ(format_rate(950), "950");
  EXPECT_EQ(format_rate(4.56e6), "4.56M");
}

TEST(ProgressSummary, Exactly) {
  RunSummary s;
  s.steps = 1000;
  s.skipped_steps = 2;
  s.seconds = 312;
  s.tokens = 3'120'000;
  s.samples = 30'000;
  s.first_loss = 5.54321;
  s.final_loss = 1.23449;
  s.lowest_loss = 1.2001;
  s.lowest_loss_step = 950;
  s.extra = {{"checkpoint", "out/global_step1000"}, {"monitor logs", "logs/run"}};
  EXPECT_EQ(format_summary(s),
            "dsx: training summary\n"
            "  steps         1000 (2 skipped)\n"
            "  time          5m12s\n"
            "  loss          5.5432 first, 1.2345 final, 1.2001 lowest (step 950)\n"
            "  throughput    10.0k tokens/s, 96.2 samples/s\n"
            "  checkpoint    out/global_step1000\n"
            "  monitor logs  logs/run\n");
}

TEST(ProgressDisplay, PlainLinesOnAPipe) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  {
    ProgressDisplay display(fds[1], 25, {ProgressDisplay::Mode::Auto, 10, 0.1});
    EXPECT_FALSE(display.is_terminal());
    display.start(0);
    for (int step = 1; step <= 25; ++step) {
      display.update(step, 10.0 / step, 1e-3, 1000, step * 0.5);
      if (step == 12) display.print_line("step=12, skipped=0, lr=[0.001], mom=[(0.9, 0.999)]");
    }
    display.finish(13);
  }
  close(fds[1]);
  std::string out = drain(fds[0]);
  close(fds[0]);
  EXPECT_EQ(out,
            "step 10/25 | loss 1.0000 | lr 1.000e-03 | 2.0k tokens/s | elapsed 5s | ETA 8s\n"
            "step=12, skipped=0, lr=[0.001], mom=[(0.9, 0.999)]\n"
            "step 20/25 | loss 0.5000 | lr 1.000e-03 | 2.0k tokens/s | elapsed 10s | ETA 3s\n"
            "step 25/25 | loss 0.4000 | lr 1.000e-03 | 2.0k tokens/s | elapsed 13s | ETA 0s\n");
}

TEST(ProgressDisplay, OneUpdatingLineOnAPseudoTerminal) {
  int master = -1, slave = -1;
  ASSERT_TRUE(open_raw_pty(60, master, slave));
  std::string out;
  {
    ProgressDisplay display(slave, 100, {});
    EXPECT_TRUE(display.is_terminal());
    for (int step = 1; step <= 100; ++step) {
      display.update(step, 5.0 - step * 0.01, 1e-4, 512, step * 0.02);  // 50 updates a second
      if (step == 50) {
        display.print_line("[Rank 0] step=50, skipped=0");
        winsize wider{};  // the user widens the window
        wider.ws_col = 100;
        wider.ws_row = 24;
        ioctl(master, TIOCSWINSZ, &wider);
      }
      out += drain(master);
    }
    display.finish(2.5);
    out += drain(master);
  }
  close(slave);
  close(master);

  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.front(), '\r');
  EXPECT_EQ(out.back(), '\n');
  // Every redraw is "\r<line>\x1b[K": split on "\r" and check each line's width.
  std::string text = out;
  replace_all(text, "\x1b[K", "");
  int draws = 0, wide = 0;
  size_t start = 0;
  while ((start = text.find('\r', start)) != std::string::npos) {
    size_t end = text.find_first_of("\r\n", start + 1);
    std::string line =
        text.substr(start + 1, end == std::string::npos ? std::string::npos : end - start - 1);
    start = start + 1;
    if (line.empty()) continue;
    ++draws;
    EXPECT_LE(display_width(line), 99) << line;
    if (display_width(line) > 59) ++wide;
  }
  // 100 updates over 2 s, redrawn at most every 0.1 s (plus the forced last one).
  EXPECT_GE(draws, 15);
  EXPECT_LE(draws, 25);
  EXPECT_GT(wide, 0) << "the line did not grow with the window";
  EXPECT_NE(out.find("\r\x1b[K[Rank 0] step=50, skipped=0\n"), std::string::npos)
      << "log line broke the bar";
  EXPECT_NE(out.find("100/100"), std::string::npos);
  // The first lines (60 columns) never exceed 59.
  std::string first = text.substr(1, text.find_first_of("\r\n", 1) - 1);
  EXPECT_LE(display_width(first), 59);
}

// A line printed while the bar waits for its next redraw (throttled) brings the bar back at the
// latest step, not at the step it last drew: the bar never lags behind the lines above it.
TEST(ProgressDisplay, APrintedLineRedrawsTheBarAtTheLatestStep) {
  int master = -1, slave = -1;
  ASSERT_TRUE(open_raw_pty(80, master, slave));
  std::string out;
  {
    ProgressDisplay display(slave, 100, {ProgressDisplay::Mode::Terminal, 10, 1000.0});  // redraws throttled
    display.update(1, 5.0, 1e-4, 512, 0.1);   // drawn
    display.update(2, 4.0, 1e-4, 512, 0.2);   // throttled: not drawn
    display.print_line("step=2, skipped=0");
    out = drain(master);
  }
  close(slave);
  close(master);
  const size_t line = out.find("step=2, skipped=0");
  ASSERT_NE(line, std::string::npos) << out;
  const std::string after = out.substr(line);
  EXPECT_NE(after.find("2/100 loss 4.0000"), std::string::npos) << after;
  EXPECT_EQ(after.find("1/100"), std::string::npos) << "the bar came back at step 1: " << after;
}
