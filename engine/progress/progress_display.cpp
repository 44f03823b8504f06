// ProgressDisplay and the line renderers. Rendering is pure (state + width -> text) so the tests
// check exact lines; ProgressDisplay only decides when to draw and writes whole updates at once.
#include "engine/progress/progress_display.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace dsx::engine::progress {
namespace {

constexpr size_t kRateWindow = 20;  // updates the rate and the ETA are measured over
constexpr const char* kEraseToEnd = "\x1b[K";

std::string printf_string(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

std::string bar(double fraction, int width, bool unicode) {
  fraction = std::clamp(fraction, 0.0, 1.0);
  if (!unicode) {
    int filled = static_cast<int>(fraction * width);
    return std::string(static_cast<size_t>(filled), '#') +
           std::string(static_cast<size_t>(width - filled), ' ');
  }
  static const char* kEighths[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
  const int eighths = static_cast<int>(fraction * width * 8);
  const int full = eighths / 8;
  std::string out;
  for (int i = 0; i < full; ++i) out += "█";
  int used = full;
  if (full < width && eighths % 8) {
    out += kEighths[eighths % 8];
    ++used;
  }
  return out + std::string(static_cast<size_t>(width - used), ' ');
}

std::string eta_text(const ProgressState& s) {
  return s.eta_seconds ? format_duration(*s.eta_seconds) : "--";
}

bool locale_is_utf8() {
  for (const char* name : {"LC_ALL", "LC_CTYPE", "LANG"}) {
    const char* value = std::getenv(name);
    if (!value || !*value) continue;
    std::string v = value;
    std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
    return v.find("utf-8") != std::string::npos || v.find("utf8") != std::string::npos;
  }
  return false;
}

}  // namespace

int display_width(const std::string& utf8) {
  int columns = 0;
  for (unsigned char c : utf8) columns += (c & 0xc0) != 0x80;
  return columns;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--";
  const long long s = std::llround(seconds);
  char text[32];
  if (s < 60)
    std::snprintf(text, sizeof text, "%llds", s);
  else if (s < 3600)
    std::snprintf(text, sizeof text, "%lldm%02llds", s / 60, s % 60);
  else if (s < 86400)
    std::snprintf(text, sizeof text, "%lldh%02lldm", s / 3600, s % 3600 / 60);
  else
    std::snprintf(text, sizeof text, "%lldd%02lldh", s / 86400, s % 86400 / 3600);
  return text;
}

std::string format_rate(double per_second) {
  if (!std::isfinite(per_second) || per_second < 0) return "--";
  if (per_second < 1e3) return printf_string("%.0f", per_second);
  if (per_second < 1e6) return printf_string("%.1fk", per_second / 1e3);
  if (per_second < 1e9) return printf_string("%.2fM", per_second / 1e6);
  return printf_string("%.2fG", per_second / 1e9);
}

std::string render_terminal_line(const ProgressState& s, int width, bool unicode) {
  const int columns = std::max(width - 1, 1);
  // The parts, most important first; a narrow terminal loses the bar, then parts from the end.
  std::vector<std::string> parts = {
      s.total_steps > 0 ? std::to_string(s.step) + "/" + std::to_string(s.total_steps)
                        : std::to_string(s.step) + " steps",
      "loss " + printf_string("%.4f", s.loss), "lr " + printf_string("%.2e", s.lr),
      format_rate(s.tokens_per_sec) + " tok/s", "ETA " + eta_text(s)};
  std::string percent;
  double fraction = 0;
  if (s.total_steps > 0) {
    fraction = static_cast<double>(s.step) / static_cast<double>(s.total_steps);
    char text[16];
    std::snprintf(text, sizeof text, "%3d%% ", static_cast<int>(std::floor(fraction * 100)));
    percent = text;
  }
  for (size_t keep = parts.size(); keep >= 1; --keep) {
    std::string stats;
    for (size_t i = 0; i < keep; ++i) stats += " " + parts[i];
    if (s.total_steps <= 0) stats.erase(0, 1);
    const int room = columns - display_width(percent) - display_width(stats);
    if (keep == parts.size() && s.total_steps > 0 && room - 2 >= 8)
      return percent + "|" + bar(fraction, room - 2, unicode) + "|" + stats;
    if (room >= 0) return percent + stats;
  }
  return (percent + parts[0]).substr(0, static_cast<size_t>(columns));  // ASCII here
}

std::string render_plain_line(const ProgressState& s) {
  std::string steps = "step " + std::to_string(s.step) +
                      (s.total_steps > 0 ? "/" + std::to_string(s.total_steps) : "");
  return steps + " | loss " + printf_string("%.4f", s.loss) + " | lr " +
         printf_string("%.3e", s.lr) + " | " + format_rate(s.tokens_per_sec) +
         " tokens/s | elapsed " + format_duration(s.elapsed_seconds) + " | ETA " + eta_text(s);
}

ProgressDisplay::ProgressDisplay(int fd, int64_t total_steps, Options options)
    : fd_(fd), options_(options) {
  // DSX_LAUNCHER_TTY: dsx launch passes our output on to a terminal (and sets COLUMNS).
  const char* launcher_tty = std::getenv("DSX_LAUNCHER_TTY");
  const bool watched = ::isatty(fd) == 1 || (fd >= 0 && launcher_tty && std::string(launcher_tty) == "1");
  terminal_ = options.mode == Mode::Terminal || (options.mode == Mode::Auto && watched);
  unicode_ = terminal_ && locale_is_utf8();
  state_.total_steps = total_steps;
}

void ProgressDisplay::start(double now) {
  start_time_ = now;
  window_.assign(1, {now, tokens_total_});
}

void ProgressDisplay::update(int64_t step, double loss, double lr, int64_t tokens, double now) {
  if (!start_time_) start_time_ = now;
  tokens_total_ += tokens;
  window_.push_back({now, tokens_total_});
  if (window_.size() > kRateWindow + 1) window_.erase(window_.begin());
  state_.step = step;
  state_.loss = loss;
  state_.lr = lr;
  state_.elapsed_seconds = now - *start_time_;
  state_.tokens_per_sec = 0;
  state_.eta_seconds.reset();
  if (window_.size() >= 2) {
    const double seconds = window_.back().first - window_.front().first;
    const auto updates = static_cast<double>(window_.size() - 1);
    if (seconds > 0) {
      state_.tokens_per_sec =
          static_cast<double>(window_.back().second - window_.front().second) / seconds;
      if (state_.total_steps > 0)
        state_.eta_seconds = static_cast<double>(std::max<int64_t>(state_.total_steps - step, 0)) *
                             seconds / updates;
    }
  }
  draw(now, step == state_.total_steps);
}

void ProgressDisplay::draw(double now, bool force) {
  if (!terminal_) {
    const bool due = state_.step % std::max<int64_t>(options_.plain_every, 1) == 0 || force;
    if (due && state_.step != last_plain_step_) {
      last_plain_step_ = state_.step;
      write_all(render_plain_line(state_) + "\n");
    }
    return;
  }
  if (!force && last_draw_ && now - *last_draw_ < options_.min_redraw_seconds) return;
  last_draw_ = now;
  std::string line = render_terminal_line(state_, terminal_width(), unicode_);
  if (bar_on_screen_ && line == last_line_) return;
  last_line_ = line;
  bar_on_screen_ = true;
  write_all("\r" + line + kEraseToEnd);
}

void ProgressDisplay::print_line(const std::string& line) {
  if (terminal_ && bar_on_screen_) {
    // The bar comes back after a carriage return like every redraw, so that whoever passes our
    // output on (dsx launch's rank prefixes) sees a redraw, not a line of its own - and with the
    // latest state, not the last one drawn, so that it never shows an older step than the line.
    last_line_ = render_terminal_line(state_, terminal_width(), unicode_);
    write_all(std::string("\r") + kEraseToEnd + line + "\n\r" + last_line_ + kEraseToEnd);
  } else {
    write_all(line + "\n");
  }
}

void ProgressDisplay::finish(double now) {
  if (start_time_) state_.elapsed_seconds = now - *start_time_;
  if (!terminal_) {
    if (state_.step > 0) draw(now, true);
    return;
  }
  draw(now, true);
  if (bar_on_screen_) write_all("\n");
  bar_on_screen_ = false;
}

void ProgressDisplay::write_all(const std::string& text) {
  // One write per update keeps the terminal from showing half-drawn lines. A failing output
  // (closed pipe, full disk) must not stop training, so errors end the write quietly.
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

int ProgressDisplay::terminal_width() const {
  winsize size{};
  if (::ioctl(fd_, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  if (const char* columns = std::getenv("COLUMNS"); columns && std::atoi(columns) > 0)
    return std::atoi(columns);
  return 80;
}

std::string format_summary(const RunSummary& s) {
  size_t key_width = 13;  // the values line up, also after a long extra key
  for (const auto& [key, value] : s.extra) key_width = std::max(key_width, key.size() + 2);
  auto row = [&](const std::string& key, const std::string& value) {
    std::string padded = key;
    padded.resize(std::max(key.size() + 1, key_width), ' ');
    return "  " + padded + value + "\n";
  };
  std::string out = "dsx: training summary\n";
  out +=
      row("steps", std::to_string(s.steps) + " (" + std::to_string(s.skipped_steps) + " skipped)");
  out += row("time", format_duration(s.seconds));
  if (s.final_loss) {
    std::string loss;
    if (s.first_loss) loss += printf_string("%.4f", *s.first_loss) + " first, ";
    loss += printf_string("%.4f", *s.final_loss) + " final";
    if (s.lowest_loss)
      loss += ", " + printf_string("%.4f", *s.lowest_loss) + " lowest (step " +
              std::to_string(s.lowest_loss_step) + ")";
    out += row("loss", loss);
  }
  if (s.seconds > 0) {
    out +=
        row("throughput", format_rate(static_cast<double>(s.tokens) / s.seconds) + " tokens/s, " +
                              printf_string("%.1f", static_cast<double>(s.samples) / s.seconds) +
                              " samples/s");
  }
  for (const auto& [key, value] : s.extra) out += row(key, value);
  return out;
}

}  // namespace dsx::engine::progress
