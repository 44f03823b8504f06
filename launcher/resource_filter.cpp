// Parsing and applying --include / --exclude.
#include "launcher/resource_filter.h"

#include <algorithm>
#include <cctype>

#include "dsx/error.h"

namespace dsx::launcher {
namespace {

struct NodeSpec {
  std::string host;
  std::vector<int> slots;  // empty: the host without a slot list
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t end = s.find(sep, start);
    parts.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

int parse_slot(const std::string& written, const std::string& flag, const std::string& filter) {
  // Spaces around a number are fine, as Python's int() takes them (DeepSpeed: -i "worker-0: 1").
  const size_t first = written.find_first_not_of(" \t");
  const std::string text =
      first == std::string::npos ? "" : written.substr(first, written.find_last_not_of(" \t") - first + 1);
  bool digits = !text.empty() && text.size() < 9 &&
                std::all_of(text.begin(), text.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  if (!digits) {
    throw Error(ErrorKind::Usage, flag + " '" + filter + "': slot '" + text +
                                      "' is not a non-negative integer. The syntax is "
                                      "HOST[:SLOT,SLOT...][@HOST...], e.g. worker-0:0,1@worker-1");
  }
  return std::stoi(text);
}

// Splits the filter into one spec per host, merging repeated hosts; slot lists are sorted and
// de-duplicated, and a bare mention does not widen a host that also has a slot list.
std::vector<NodeSpec> parse_filter(const std::string& filter, const std::string& flag) {
  std::vector<NodeSpec> specs;
  for (const auto& node : split(filter, '@')) {
    NodeSpec spec;
    auto colon = node.find(':');
    if (colon == std::string::npos) {
      spec.host = node;
    } else {
      auto parts = split(node, ':');
      if (parts.size() != 2) {
        throw Error(ErrorKind::Usage, flag + " '" + filter + "': '" + node +
                                          "' has more than one ':' (expected HOST:SLOT,SLOT...); "
                                          "hosts containing ':' cannot be named in a filter");
      }
      spec.host = parts[0];
      for (const auto& s : split(parts[1], ',')) spec.slots.push_back(parse_slot(s, flag, filter));
    }
    auto same = std::find_if(specs.begin(), specs.end(), [&](const NodeSpec& n) { return n.host == spec.host; });
    if (same == specs.end()) {
      specs.push_back(spec);
    } else {
      same->slots.insert(same->slots.end(), spec.slots.begin(), spec.slots.end());
    }
  }
  for (auto& spec : specs) {
    std::sort(spec.slots.begin(), spec.slots.end());
    spec.slots.erase(std::unique(spec.slots.begin(), spec.slots.end()), spec.slots.end());
  }
  return specs;
}

void check_spec(const World& hosts, const NodeSpec& spec) {
  int index = find_host(hosts, spec.host);
  if (index < 0) {
    throw Error(ErrorKind::Usage, "Hostname '" + spec.host + "' not found in hostfile (hosts: " +
                                      describe(hosts) + ")");
  }
  const auto& available = hosts[index].slots;
  for (int slot : spec.slots) {
    if (std::find(available.begin(), available.end(), slot) == available.end()) {
      throw Error(ErrorKind::Usage, "No slot '" + std::to_string(slot) + "' specified on host '" +
                                        spec.host + "' (it has slots " + describe({hosts[index]}) + ")");
    }
  }
}

}  // namespace

World filter_resources(const World& hosts, const std::string& include, const std::string& exclude) {
  if (!include.empty() && !exclude.empty()) {
    throw Error(ErrorKind::Usage,
                "include_str and exclude_str are mutually exclusive: give --include or --exclude, not both");
  }
  if (include.empty() && exclude.empty()) return hosts;
  bool including = !include.empty();
  auto specs = parse_filter(including ? include : exclude, including ? "--include" : "--exclude");
  for (const auto& spec : specs) check_spec(hosts, spec);

  World result;
  for (const auto& h : hosts) {
    auto spec = std::find_if(specs.begin(), specs.end(), [&](const NodeSpec& n) { return n.host == h.host; });
    HostSlots kept{h.host, {}};
    if (including) {
      if (spec != specs.end()) kept.slots = spec->slots.empty() ? h.slots : spec->slots;
    } else if (spec == specs.end()) {
      kept.slots = h.slots;
    } else if (!spec->slots.empty()) {
      for (int s : h.slots)
        if (!std::binary_search(spec->slots.begin(), spec->slots.end(), s)) kept.slots.push_back(s);
    }
    if (!kept.slots.empty()) result.push_back(kept);
  }
  return result;
}

}  // namespace dsx::launcher
