// The summary of a traced window (see window_summary.h).
#include "engine/profiling/window_summary.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "dsx/error.h"

namespace dsx::engine {

namespace {

double seconds(const trace::Event& e) { return static_cast<double>(e.end_ns - e.begin_ns) / 1e9; }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string fixed(double v, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Names may hold spaces: the text form escapes none, so '=' and ';' are the separators.
std::string field_name(std::string name) {
  std::replace(name.begin(), name.end(), '=', '_');
  std::replace(name.begin(), name.end(), ';', '_');
  return name;
}

struct Row {
  std::string name;
  std::vector<double> per_rank;  // ms per step
};

std::string row_line(const Row& row, const std::vector<RankWindow>& ranks) {
  std::vector<double> v = row.per_rank;
  const auto slowest = std::max_element(v.begin(), v.end()) - v.begin();
  char buf[160];
  std::snprintf(buf, sizeof buf, "  %-38s %9s %9s %9s  rank %d", row.name.c_str(),
                fixed(*std::min_element(v.begin(), v.end()), 2).c_str(), fixed(median(v), 2).c_str(),
                fixed(v[static_cast<size_t>(slowest)], 2).c_str(), ranks[static_cast<size_t>(slowest)].rank);
  return buf;
}

}  // namespace

RankWindow rank_window(const std::vector<trace::Event>& events, int main_track, int rank) {
  RankWindow w;
  w.rank = rank;
  for (const trace::Event& e : events) {
    if (e.track != main_track) continue;
    const std::string_view category = e.category;
    if (category == trace::kStepCategory && e.name.rfind(trace::kStepName, 0) == 0) {
      ++w.steps;
      w.step_seconds += seconds(e);
    } else if (category == "wait") {
      w.wait_seconds += seconds(e);
    } else if (category == "phase") {
      w.phases[e.name] += seconds(e);
    }
  }
  return w;
}

std::string to_text(const RankWindow& w) {
  std::ostringstream out;
  out.precision(9);
  out << "rank=" << w.rank << ";steps=" << w.steps << ";step=" << w.step_seconds << ";wait=" << w.wait_seconds
      << ";busy=" << w.comm_busy_seconds << ";exposed=" << w.comm_exposed_seconds;
  for (const auto& [name, s] : w.phases) out << ";phase:" << field_name(name) << "=" << s;
  return out.str();
}

RankWindow rank_window_from_text(const std::string& text) {
  RankWindow w;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ';');) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) throw Error(ErrorKind::Internal, "a traced window's totals: '" + text + "'");
    const std::string k = item.substr(0, eq);
    const double v = std::stod(item.substr(eq + 1));
    if (k == "rank") w.rank = static_cast<int>(v);
    else if (k == "steps") w.steps = static_cast<int>(v);
    else if (k == "step") w.step_seconds = v;
    else if (k == "wait") w.wait_seconds = v;
    else if (k == "busy") w.comm_busy_seconds = v;
    else if (k == "exposed") w.comm_exposed_seconds = v;
    else if (k.rfind("phase:", 0) == 0) w.phases[k.substr(6)] = v;
  }
  return w;
}

std::optional<Straggler> find_straggler(const std::vector<RankWindow>& ranks, double threshold) {
  if (ranks.size() < 2) return std::nullopt;
  std::vector<double> compute;
  for (const RankWindow& r : ranks) compute.push_back(r.compute_seconds());
  const double mid = median(compute);
  const auto slowest = std::max_element(compute.begin(), compute.end()) - compute.begin();
  const double above = mid > 0 ? compute[static_cast<size_t>(slowest)] / mid - 1 : 0;
  if (above <= threshold) return std::nullopt;
  return Straggler{ranks[static_cast<size_t>(slowest)].rank, above};
}

std::vector<std::string> format_window_summary(const std::vector<RankWindow>& ranks, int64_t first_step,
                                               int64_t last_step) {
  std::vector<std::string> lines;
  lines.push_back("trace of steps " + std::to_string(first_step) + "-" + std::to_string(last_step) + " over " +
                  std::to_string(ranks.size()) + " rank(s), ms per step:");
  char head[160];
  std::snprintf(head, sizeof head, "  %-38s %9s %9s %9s  %s", "phase", "min", "median", "max", "slowest");
  lines.push_back(head);
  auto per_step = [](const RankWindow& r, double s) { return r.steps ? s * 1e3 / r.steps : 0.0; };
  std::vector<Row> rows = {{"step", {}}, {"compute (step less waits)", {}}, {"waiting (communication, other ranks)", {}}};
  for (const RankWindow& r : ranks) {
    rows[0].per_rank.push_back(per_step(r, r.step_seconds));
    rows[1].per_rank.push_back(per_step(r, r.compute_seconds()));
    rows[2].per_rank.push_back(per_step(r, r.wait_seconds));
  }
  std::vector<std::string> names;
  for (const RankWindow& r : ranks) {
    for (const auto& [name, s] : r.phases) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  for (const std::string& name : names) {
    Row row{name, {}};
    for (const RankWindow& r : ranks) {
      const auto it = r.phases.find(name);
      row.per_rank.push_back(per_step(r, it == r.phases.end() ? 0 : it->second));
    }
    rows.push_back(std::move(row));
  }
  for (const Row& row : rows) lines.push_back(row_line(row, ranks));
  if (auto s = find_straggler(ranks)) {
    lines.push_back("  straggler: rank " + std::to_string(s->rank) + " (compute " + fixed(s->above_median * 100, 0) +
                    "% above the median; the others wait for it)");
  } else if (ranks.size() > 1) {
    lines.push_back("  no straggler: every rank's compute is within 10% of the median");
  }
  std::vector<double> hidden;
  for (const RankWindow& r : ranks) {
    if (r.comm_busy_seconds > 0) {
      hidden.push_back(std::clamp(1 - r.comm_exposed_seconds / r.comm_busy_seconds, 0.0, 1.0));
    }
  }
  if (!hidden.empty()) {
    lines.push_back("  gradient communication hidden behind compute: " + fixed(median(hidden) * 100, 0) +
                    "% (median over ranks)");
  }
  return lines;
}

}  // namespace dsx::engine
