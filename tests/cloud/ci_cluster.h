// The clusters the cloud tests plan and render: "ci" in a made-up AWS account (a subnet that
// exists nowhere) and in GCP project proj-1. Each test sets the type, the count and whatever its
// case is about on top.
#pragma once

#include <string>

#include "cloud/aws_cluster.h"
#include "cloud/gcp_cluster.h"

namespace dsx::test {

inline cloud::AwsClusterOptions ci_aws_cluster(const std::string& region) {
  cloud::AwsClusterOptions o;
  o.cluster = "ci";
  o.region = region;
  o.subnet = "subnet-0aaa";
  o.ssh_cidr = "10.0.0.0/16";
  return o;
}

inline cloud::GcpClusterOptions ci_gcp_cluster() {
  cloud::GcpClusterOptions o;
  o.cluster = "ci";
  o.project = "proj-1";
  o.zone = "us-central1-a";
  o.ssh_cidr = "35.235.240.0/20";
  return o;
}

}  // namespace dsx::test
