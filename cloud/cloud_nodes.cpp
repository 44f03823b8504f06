// Reading the CLIs' instance listings with RapidJSON, and the hostfile and status built on them.
#include "cloud/cloud_nodes.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <sstream>

#include "cloud/cli_json.h"
#include "dsx/error.h"

namespace dsx::cloud {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

// GCP label values hold no '.': the node script writes 78.5 as 78_5.
std::string label_number(std::string value) {
  std::replace(value.begin(), value.end(), '_', '.');
  return value;
}

// The bench column: "78.5", "20.0 slow", or "-" before the bench.
std::string bench_cell(const CloudNode& n) {
  if (n.busbw.empty() || n.busbw == "-") return n.health == "failed" ? "failed" : "-";
  return n.health.empty() || n.health == "ok" ? n.busbw : n.busbw + " " + n.health;
}

// The cluster's line: its all-nodes figure beside the reference.
std::string bench_summary(const std::vector<CloudNode>& nodes, std::string_view reference) {
  std::string all;
  for (const auto& n : nodes) {
    if (!n.busbw_all.empty() && n.busbw_all != "-") all = n.busbw_all;
  }
  std::string line = all.empty() ? "cluster bench: not run yet (the lowest node runs it once "
                                   "every node passed its checks)"
                                 : "cluster bench: " + all +
                                       " GB/s busbw over all nodes; per node, its better "
                                       "neighbour pair";
  return line + "; " + std::string(reference) + "\n";
}

// An IPv4 address as one number, for ordering; throws on anything else.
uint32_t ipv4_key(const std::string& ip) {
  unsigned a, b, c, d;
  char tail;
  if (std::sscanf(ip.c_str(), "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) != 4 || a > 255 || b > 255 ||
      c > 255 || d > 255) {
    throw Error(ErrorKind::Format, "'" + ip + "' is not an IPv4 address");
  }
  return a << 24 | b << 16 | c << 8 | d;
}

}  // namespace

std::vector<CloudNode> parse_aws_describe_instances(std::string_view json) {
  auto doc = parse_cli_json(json, "aws ec2 describe-instances");
  if (!doc.IsObject() || !doc.HasMember("Reservations") || !doc["Reservations"].IsArray()) {
    throw Error(ErrorKind::Format, "aws ec2 describe-instances output has no Reservations list");
  }
  std::vector<CloudNode> nodes;
  for (const auto& reservation : doc["Reservations"].GetArray()) {
    if (!reservation.IsObject() || !reservation.HasMember("Instances") ||
        !reservation["Instances"].IsArray()) {
      throw Error(ErrorKind::Format,
                  "a reservation in describe-instances output has no Instances list");
    }
    for (const auto& instance : reservation["Instances"].GetArray()) {
      CloudNode node;
      node.id = string_at(instance, "InstanceId");
      node.private_ip = string_at(instance, "PrivateIpAddress");
      if (instance.IsObject() && instance.HasMember("State")) {
        node.state = lower(string_at(instance["State"], "Name"));
      }
      if (instance.IsObject() && instance.HasMember("Tags") && instance["Tags"].IsArray()) {
        for (const auto& tag : instance["Tags"].GetArray()) {
          const std::string key = string_at(tag, "Key");
          if (key == "dsx-ready") node.ready = string_at(tag, "Value");
          if (key == "dsx-busbw") node.busbw = string_at(tag, "Value");
          if (key == "dsx-busbw-all") node.busbw_all = string_at(tag, "Value");
          if (key == "dsx-health") node.health = string_at(tag, "Value");
        }
      }
      if (node.id.empty()) throw Error(ErrorKind::Format, "an instance without InstanceId");
      nodes.push_back(node);
    }
  }
  return nodes;
}

std::vector<CloudNode> parse_gcp_instances_list(std::string_view json) {
  auto doc = parse_cli_json(json, "gcloud compute instances list");
  if (!doc.IsArray()) {
    throw Error(ErrorKind::Format, "gcloud compute instances list output is not a JSON list");
  }
  std::vector<CloudNode> nodes;
  for (const auto& instance : doc.GetArray()) {
    CloudNode node;
    node.id = string_at(instance, "name");
    node.state = lower(string_at(instance, "status"));
    if (instance.IsObject() && instance.HasMember("networkInterfaces") &&
        instance["networkInterfaces"].IsArray() && !instance["networkInterfaces"].Empty()) {
      node.private_ip = string_at(instance["networkInterfaces"][0], "networkIP");
    }
    if (instance.IsObject() && instance.HasMember("labels")) {
      const auto& labels = instance["labels"];
      node.ready = string_at(labels, "dsx-ready");
      node.busbw = label_number(string_at(labels, "dsx-busbw"));
      node.busbw_all = label_number(string_at(labels, "dsx-busbw-all"));
      node.health = string_at(labels, "dsx-health");
    }
    if (node.id.empty()) throw Error(ErrorKind::Format, "an instance without a name");
    nodes.push_back(node);
  }
  return nodes;
}

std::string unhealthy_reason(const CloudNode& node) {
  if (node.health == "slow" || node.health == "failed") return "dsx-health=" + node.health;
  if (node.ready.rfind("failed-", 0) == 0) return "dsx-ready=" + node.ready;
  return "";
}

std::vector<std::string> left_out_of_hostfile(const std::vector<CloudNode>& nodes) {
  std::vector<std::pair<uint32_t, std::string>> left_out;
  for (const auto& node : nodes) {
    const std::string reason = unhealthy_reason(node);
    if (node.state == "running" && !node.private_ip.empty() && !reason.empty()) {
      left_out.emplace_back(ipv4_key(node.private_ip),
                            node.id + " (" + node.private_ip + ", " + reason + ")");
    }
  }
  std::sort(left_out.begin(), left_out.end());
  std::vector<std::string> named;
  for (const auto& [key, text] : left_out) named.push_back(text);
  return named;
}

std::string render_hostfile(const std::vector<CloudNode>& nodes, int slots) {
  std::vector<std::pair<uint32_t, std::string>> running;
  for (const auto& node : nodes) {
    if (node.state == "running" && !node.private_ip.empty() && unhealthy_reason(node).empty()) {
      running.emplace_back(ipv4_key(node.private_ip), node.private_ip);
    }
  }
  std::sort(running.begin(), running.end());
  running.erase(std::unique(running.begin(), running.end()), running.end());
  std::string out;
  for (const auto& [key, ip] : running) out += ip + " slots=" + std::to_string(slots) + "\n";
  return out;
}

std::string render_status(const std::vector<CloudNode>& nodes, int expected,
                          std::string_view reference) {
  std::ostringstream out;
  char line[200];
  std::snprintf(line, sizeof line, "%-22s %-16s %-12s %-14s %s\n", "instance", "private ip",
                "state", "dsx-ready", "busbw GB/s");
  out << line;
  int running = 0, ready = 0;
  for (const auto& n : nodes) {
    std::snprintf(line, sizeof line, "%-22s %-16s %-12s %-14s %s\n", n.id.c_str(),
                  n.private_ip.empty() ? "-" : n.private_ip.c_str(), n.state.c_str(),
                  !n.ready.empty()       ? n.ready.c_str()
                  : n.state == "running" ? "(setting up)"
                                         : "-",
                  bench_cell(n).c_str());
    out << line;
    running += n.state == "running";
    ready += n.state == "running" && n.ready == "yes";
  }
  out << running << " of " << expected << " nodes running, " << ready << " ready";
  if (ready == expected) {
    out << ": write the hostfile with `hostfile` and start with dsx launch --hostfile";
  }
  out << "\n";
  for (const auto& node : left_out_of_hostfile(nodes))
    out << "not in the hostfile: " << node << "\n";
  if (!reference.empty()) out << bench_summary(nodes, reference);
  return out.str();
}

}  // namespace dsx::cloud
