// The load side of node_checkpoint.h: which checkpoint every node can resume from.
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "dsx/error.h"
#include "checkpoint/layout.h"
#include "checkpoint/load.h"
#include "engine/node_checkpoint.h"

namespace dsx::engine {
namespace {

namespace ck = checkpoint;

// One committed checkpoint a node holds. Two nodes' copies are one checkpoint when their tag and
// save id agree (a tag saved again gets a new id).
struct Held {
  std::string tag, save_id;
  int64_t step = -1;
  bool latest = false;
  bool broken = false;  // `latest` names it but it does not open
  bool same_save(const Held& o) const { return tag == o.tag && save_id == o.save_id; }
};

// A node's checkpoints, one line each: tag, save id, step, whether `latest` names it. `latest`
// is what find_latest_checkpoint takes (the newest folder that verifies when the file is missing
// or empty); its note, or why nothing can be taken, follows on a line of its own ("\tnote\t...",
// "\terror\t...": a tag never starts with a tab).
std::string describe_local(const std::string& dir) {
  std::string latest;
  std::ostringstream out;
  const auto line_of = [](std::string text) {
    std::replace(text.begin(), text.end(), '\n', ' ');
    return text;
  };
  try {
    const ck::LatestCheckpoint found = ck::find_latest_checkpoint(dir);
    latest = found.tag;
    if (!found.note.empty()) out << "\tnote\t" << line_of(found.note) << '\n';
  } catch (const Error& e) {
    out << "\terror\t" << line_of(e.what()) << '\n';
  }
  bool latest_listed = false;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name.starts_with(".")) continue;
    try {
      const auto reader = ck::CheckpointReader::open(dir, name, /*check_all_sizes=*/false);
      const auto& m = reader.manifest();
      out << name << '\t' << m.save_id << '\t' << m.step << '\t' << (name == latest) << '\n';
      latest_listed = latest_listed || name == latest;
    } catch (const Error&) {  // not a checkpoint, or a damaged one: not a candidate
    }
  }
  // A `latest` whose checkpoint does not open is loaded anyway, so that the load names what is
  // wrong with it instead of the run starting from scratch.
  if (!latest.empty() && !latest_listed) out << latest << "\t\t-1\tbroken\n";
  return out.str();
}

// What a node said: its checkpoints, and the note or error of its `latest`.
struct NodeHolds {
  std::vector<Held> held;
  std::string note, error;
};

NodeHolds parse_held(const std::string& text) {
  NodeHolds node;
  std::vector<Held>& held = node.held;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("\tnote\t")) node.note = line.substr(6);
    if (line.starts_with("\terror\t")) node.error = line.substr(7);
    if (line.starts_with("\t")) continue;
    std::istringstream fields(line);
    Held h;
    std::string step, latest;
    std::getline(fields, h.tag, '\t');
    std::getline(fields, h.save_id, '\t');
    std::getline(fields, step, '\t');
    std::getline(fields, latest, '\t');
    h.step = std::stoll(step);
    h.latest = latest == "1";
    h.broken = latest == "broken";
    held.push_back(h);
  }
  return node;
}

const Held* find(const std::vector<Held>& held, const Held& wanted) {
  for (const Held& h : held)
    if (h.same_save(wanted)) return &h;
  return nullptr;
}

std::string summary(const std::vector<std::vector<Held>>& nodes) {
  std::ostringstream out;
  for (size_t n = 0; n < nodes.size(); ++n) {
    out << (n ? "; " : "") << "node " << n << " holds ";
    if (nodes[n].empty()) out << "none";
    for (size_t i = 0; i < nodes[n].size(); ++i) out << (i ? ", " : "") << nodes[n][i].tag << (nodes[n][i].latest ? " (latest)" : "");
  }
  return out.str();
}

// Rank 0's choice: "scratch", "found\t<tag>\t<note>" or "error:<why>".
std::string choose(const std::vector<std::vector<Held>>& nodes, const std::string& dir, const std::string& tag) {
  for (const auto& node : nodes)
    for (const Held& h : node)
      if (h.broken && tag.empty()) return "found\t" + h.tag + "\t";
  std::vector<Held> candidates;  // node 0's checkpoints that every other node holds too
  for (const Held& h : nodes[0]) {
    bool everywhere = true;
    for (size_t n = 1; n < nodes.size(); ++n) everywhere = everywhere && find(nodes[n], h);
    if (everywhere && (tag.empty() || h.tag == tag)) candidates.push_back(h);
  }
  if (!tag.empty()) {
    if (candidates.empty())
      return "error:checkpoint " + tag + " is not on every node as one save (" + summary(nodes) + ")";
    return "found\t" + tag + "\t";
  }
  bool any_latest = false, same_latest = true;
  const Held* first = nullptr;
  for (const auto& node : nodes) {
    const Held* latest = nullptr;
    for (const Held& h : node) latest = h.latest ? &h : latest;
    any_latest = any_latest || latest;
    if (!latest || (first && !first->same_save(*latest))) same_latest = false;
    if (latest && !first) first = latest;
  }
  if (!any_latest) return "scratch";
  if (same_latest) return "found\t" + first->tag + "\t";
  if (candidates.empty())
    return "error:no checkpoint in " + dir + " is on every node, so no rank can resume (" + summary(nodes) +
           "); copy a complete save to the nodes that lack it, or start without --load";
  const Held* newest = &candidates[0];
  for (const Held& h : candidates) newest = h.step > newest->step ? &h : newest;
  return "found\t" + newest->tag + "\tthe nodes' latest checkpoints differ (a save was interrupted while the nodes "
         "committed it: " + summary(nodes) + "); resuming from " + newest->tag + ", the newest every node holds";
}

}  // namespace

ResumePoint agree_on_resume(const NodeCommit& c, const std::string& load_dir, const std::string& tag) {
  if (c.layout.leads(c.rank)) c.store.set(c.key + "held/" + std::to_string(c.layout.node), describe_local(load_dir));
  if (c.rank == 0) {
    std::vector<std::vector<Held>> nodes;
    std::string note, error;  // of `latest` files missing or empty: the first node's that says one
    for (int n = 0; n < c.layout.nodes; ++n) {
      NodeHolds node = parse_held(c.store.get(c.key + "held/" + std::to_string(n), c.timeout));
      const std::string where = c.layout.nodes > 1 ? "node " + std::to_string(n) + ": " : "";
      if (note.empty() && !node.note.empty()) note = where + node.note;
      if (error.empty() && !node.error.empty()) error = where + node.error;
      nodes.push_back(std::move(node.held));
    }
    std::string choice = tag.empty() && !error.empty() ? "error:" + error : choose(nodes, load_dir, tag);
    if (tag.empty() && !note.empty() && choice.starts_with("found\t"))
      choice += choice.ends_with("\t") ? note : "; " + note;
    c.store.set(c.key + "choice", choice);
  }
  const std::string choice = c.store.get(c.key + "choice", c.timeout);
  if (choice.starts_with("error:")) throw Error(ErrorKind::Io, "dsx train --load: " + choice.substr(6));
  ResumePoint point;
  if (choice == "scratch") return point;
  std::istringstream in(choice);
  std::string found;
  std::getline(in, found, '\t');
  std::getline(in, point.tag, '\t');
  std::getline(in, point.note);
  point.found = true;
  return point;
}

}  // namespace dsx::engine
