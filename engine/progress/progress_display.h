// What rank 0 shows while training. On a terminal: one line redrawn in place with a bar,
// step/total, loss, lr, tokens/s and ETA — carriage return, one write per redraw, at most ten
// redraws a second, fitted to the terminal's width, ended with a newline. Anywhere else (a log
// file, a pipe): a plain line every `plain_every` steps. Log lines (DeepSpeed's step= lines,
// warnings) go through print_line so they never break the bar. A final summary closes the run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dsx::engine::progress {

struct ProgressState {
  int64_t step = 0;         // optimizer steps done
  int64_t total_steps = 0;  // 0: unknown (no bar, no ETA)
  double loss = 0;
  double lr = 0;
  double tokens_per_sec = 0;
  double elapsed_seconds = 0;
  std::optional<double> eta_seconds;
};

// The terminal line, at most `width` - 1 columns (the last column would wrap on some terminals).
// `unicode`: the bar uses block characters (eighths), otherwise '#'.
std::string render_terminal_line(const ProgressState& state, int width, bool unicode);
// The plain line:
// "step 370/1000 | loss 2.3456 | lr 3.000e-04 | 12.3k tokens/s | elapsed 1m02s | ETA 1m23s"
std::string render_plain_line(const ProgressState& state);

std::string format_duration(double seconds);  // "59s", "1m02s", "2h03m", "3d04h"
std::string format_rate(double per_second);   // "950", "12.3k", "4.56M"
int display_width(const std::string& utf8);   // columns of a line of single-width characters

class ProgressDisplay {
 public:
  enum class Mode { Auto, Terminal, Plain };
  struct Options {
    Mode mode = Mode::Auto;    // Auto: Terminal when fd is a terminal
    int64_t plain_every = 10;  // Plain mode: a line every this many steps (and the last)
    double min_redraw_seconds = 0.1;
  };

  ProgressDisplay(int fd, int64_t total_steps, Options options);

  // When training starts (elapsed time counts from here; else from the first update).
  void start(double now);
  // After each optimizer step: `tokens` trained in it, `now` in seconds (monotonic).
  void update(int64_t step, double loss, double lr, int64_t tokens, double now);
  // A whole line of log output, printed above the bar.
  void print_line(const std::string& line);
  // Draws the final state and ends the bar's line.
  void finish(double now);

  bool is_terminal() const { return terminal_; }
  const ProgressState& state() const { return state_; }

 private:
  void draw(double now, bool force);
  void write_all(const std::string& text);
  int terminal_width() const;

  int fd_;
  Options options_;
  bool terminal_ = false;
  bool unicode_ = false;
  ProgressState state_;
  std::optional<double> start_time_;
  std::optional<double> last_draw_;
  bool bar_on_screen_ = false;
  int64_t last_plain_step_ = -1;
  std::string last_line_;
  // Recent (time, tokens) pairs for a rate and ETA that follow the current speed.
  std::vector<std::pair<double, int64_t>> window_;
  int64_t tokens_total_ = 0;
};

// The end-of-run summary.
struct RunSummary {
  int64_t steps = 0;
  int64_t skipped_steps = 0;
  double seconds = 0;
  int64_t tokens = 0;
  int64_t samples = 0;
  std::optional<double> first_loss, final_loss, lowest_loss;
  int64_t lowest_loss_step = 0;
  // More rows, e.g. {"checkpoint", "out/global_step100"}.
  std::vector<std::pair<std::string, std::string>> extra;
};
std::string format_summary(const RunSummary& summary);

}  // namespace dsx::engine::progress
