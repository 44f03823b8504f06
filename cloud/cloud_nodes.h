// The nodes of a running cluster as the cloud reports them (aws ec2 describe-instances,
// gcloud compute instances list, both as JSON) and the hostfile made from them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dsx::cloud {

struct CloudNode {
  std::string id;          // i-... on AWS, the instance name on GCP
  std::string private_ip;  // primary interface; "" while pending
  std::string state;       // lower case: pending, running, terminated, ...
  std::string ready;       // the dsx-ready tag/label the node script sets: yes, failed-<step>, ""
  // The cluster bench's tags/labels (GCP's '_' read back as '.'): this node's better neighbour
  // pair and the all-nodes figure, in GB/s busbw, and its verdict (ok, slow, failed); "" before.
  std::string busbw, busbw_all, health;
};

// Throw dsx::Error(Format) naming what is missing when the text is not the CLI's JSON.
std::vector<CloudNode> parse_aws_describe_instances(std::string_view json);
std::vector<CloudNode> parse_gcp_instances_list(std::string_view json);

// Why a node does not belong in the hostfile though it runs: its set-up failed
// (dsx-ready=failed-<step>) or the cluster bench found it slow or failed (dsx-health); "" when
// nothing is known against it.
std::string unhealthy_reason(const CloudNode& node);

// The running nodes that unhealthy_reason leaves out, as "ID (IP, REASON)", in address order.
std::vector<std::string> left_out_of_hostfile(const std::vector<CloudNode>& nodes);

// "IP slots=N" for each running node with an address and no unhealthy_reason, ordered by address
// (numerically, octet by octet) so that the first line (rank 0, MASTER_ADDR) is the same every
// time it is made.
std::string render_hostfile(const std::vector<CloudNode>& nodes, int slots);

// A table of the nodes with their bench figures and a summary line ("3 of 4 running, 2 ready"),
// the nodes left out of the hostfile; with a `reference` (health_reference_line), a line of the
// cluster's figure beside it.
std::string render_status(const std::vector<CloudNode>& nodes, int expected,
                          std::string_view reference = "");

}  // namespace dsx::cloud
