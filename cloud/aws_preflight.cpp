// AWS pre-flight: the read-only calls and the checks on their JSON. Each finding names what to
// change (another subnet, a quota increase, the reservation's state).
#include "cloud/aws_preflight.h"

#include <iostream>

#include "cloud/aws_plan.h"
#include "cloud/cli_json.h"
#include "cloud/instance_types.h"

namespace dsx::cloud {

namespace {

using Findings = std::vector<Finding>;

void check_offering(const AwsClusterOptions& o, const AwsPreflightAnswers& a, Findings& out) {
  if (a.subnet_az.empty()) {
    out.push_back({true, "subnet " + o.subnet + " was not found in " + o.region +
                             " (the error is above): check --subnet and --region"});
    return;
  }
  if (a.offerings_json.empty()) {
    out.push_back({true, "could not list where " + o.instance_type +
                             " is offered (the error is above): check the credentials and --region"});
    return;
  }
  auto doc = parse_cli_json(a.offerings_json, "aws ec2 describe-instance-type-offerings");
  const auto* list = json_at(doc, "InstanceTypeOfferings");
  if (list && list->IsArray()) {
    for (const auto& offer : list->GetArray()) {
      if (string_at(offer, "InstanceType") == o.instance_type &&
          string_at(offer, "Location") == a.subnet_az)
        return;
    }
  }
  out.push_back({true, o.instance_type + " is not offered in " + a.subnet_az + ", the zone of " +
                           o.subnet + ": use a subnet in a zone that offers it (aws ec2 "
                           "describe-instance-type-offerings --location-type availability-zone "
                           "--filters Name=instance-type,Values=" + o.instance_type + ")"});
}

// Returns the type's vCPUs (0 when unknown).
int check_type(const AwsClusterOptions& o, const AwsPreflightAnswers& a, Findings& out) {
  const auto doc = a.types_json.empty()
                       ? rapidjson::Document()
                       : parse_cli_json(a.types_json, "aws ec2 describe-instance-types");
  const auto* info = a.types_json.empty() ? nullptr : json_at(doc, "InstanceTypes.0");
  if (!info) {
    out.push_back({true, "aws ec2 describe-instance-types gave nothing for " + o.instance_type +
                             " in " + o.region + ": check --instance-type and --region"});
    return 0;
  }
  const int cards = aws_instance_type(o.instance_type).network_cards;
  const int offered = int(number_at(*info, "NetworkInfo.MaximumNetworkCards", 0));
  if (!bool_at(*info, "NetworkInfo.EfaSupported")) {
    out.push_back({true, o.instance_type + " reports no EFA support (NetworkInfo.EfaSupported): "
                                           "dsx's templates need EFA; pick another type"});
  }
  if (offered < cards) {
    out.push_back({true, o.instance_type + " has " + std::to_string(offered) +
                             " network cards, but the launch template puts an EFA interface on " +
                             std::to_string(cards) + ": update dsx's instance table"});
  } else if (offered > cards) {
    out.push_back({false, o.instance_type + " has " + std::to_string(offered) +
                              " network cards; dsx uses " + std::to_string(cards)});
  }
  return int(number_at(*info, "VCpuInfo.DefaultVCpus", 0));
}

void check_quota(const AwsClusterOptions& o, const AwsPreflightAnswers& a, int vcpus,
                 Findings& out) {
  const double limit =
      a.quota_json.empty()
          ? -1
          : number_at(parse_cli_json(a.quota_json, "aws service-quotas get-service-quota"),
                      "Quota.Value");
  const int need = vcpus * o.count;
  const std::string request = "request an increase to " + std::to_string(need) +
                              " (aws service-quotas request-service-quota-increase --service-code "
                              "ec2 --quota-code " + kAwsPQuotaCode + " --desired-value " +
                              std::to_string(need) + ")";
  if (limit < 0) {
    out.push_back({false, std::string("could not read the quota ") + kAwsPQuotaCode +
                              " (Running On-Demand P instances): check it by hand"});
  } else if (need > 0 && limit < need) {
    // A Capacity Block may be counted apart from the On-Demand quota: do not stop for it.
    out.push_back({!o.capacity_block,
                   std::to_string(o.count) + " x " + o.instance_type + " need " +
                       std::to_string(need) + " vCPUs of 'Running On-Demand P instances' (" +
                       kAwsPQuotaCode + ") in " + o.region + ", but the quota is " +
                       std::to_string(int(limit)) + ": " + request});
  }
}

void check_reservation(const AwsClusterOptions& o, const AwsPreflightAnswers& a, Findings& out) {
  if (o.capacity_reservation.empty()) return;
  const auto doc = a.reservation_json.empty()
                       ? rapidjson::Document()
                       : parse_cli_json(a.reservation_json, "aws ec2 describe-capacity-reservations");
  const auto* r = a.reservation_json.empty() ? nullptr : json_at(doc, "CapacityReservations.0");
  const std::string name = "capacity reservation " + o.capacity_reservation;
  if (!r) {
    out.push_back({true, name + " was not found in " + o.region + ": check the id and --region"});
    return;
  }
  const std::string state = string_at(*r, "State");
  if (state == "pending" || state == "assessing") {
    out.push_back({false, name + " is " + state + " (it may already be usable)"});
  } else if (state != "active") {
    out.push_back({true, name + " is " + state +
                             ", not active: a scheduled block starts at its start time, a "
                             "payment-pending one once paid; expired/cancelled ones need a new "
                             "reservation"});
  }
  if (string_at(*r, "InstanceType") != o.instance_type) {
    out.push_back({true, name + " is for " + string_at(*r, "InstanceType") + ", not " +
                             o.instance_type + ": pass --instance-type " +
                             string_at(*r, "InstanceType")});
  }
  if (string_at(*r, "AvailabilityZone") != a.subnet_az) {
    out.push_back({true, name + " is in " + string_at(*r, "AvailabilityZone") + " but " +
                             o.subnet + " is in " + a.subnet_az + ": use a subnet in " +
                             string_at(*r, "AvailabilityZone")});
  }
  const int available = int(number_at(*r, "AvailableInstanceCount", 0));
  if (available < o.count) {
    out.push_back({true, name + " has " + std::to_string(available) + " instances free, " +
                             std::to_string(o.count) + " asked for: lower --count or enlarge it"});
  }
  const std::string type = string_at(*r, "ReservationType");
  if (o.capacity_block && !type.empty() && type != "capacity-block") {
    out.push_back({true, name + " is not a Capacity Block (ReservationType " + type +
                             "): drop --capacity-block"});
  }
}

}  // namespace

std::vector<Finding> aws_preflight_findings(const AwsClusterOptions& o,
                                            const AwsPreflightAnswers& a) {
  Findings out;
  check_offering(o, a, out);
  const int vcpus = check_type(o, a, out);
  check_quota(o, a, vcpus, out);
  check_reservation(o, a, out);
  return out;
}

namespace {

// The image must exist in the region before anything is made: a bad --image would otherwise
// fail only at run-instances, after the security group, role and file system exist. The steps
// are refusals, so the printed script makes the same check. A resolve:ssm: image is first
// resolved to its AMI id, as run-instances does.
void add_image_check(Plan& plan, const AwsClusterOptions& o) {
  const std::string ssm = "resolve:ssm:";
  std::string image_id = o.image;
  if (o.image.rfind(ssm, 0) == 0) {
    const std::string parameter = o.image.substr(ssm.size());
    Step resolve{"pre-flight: the AMI that SSM parameter " + parameter + " names",
                 aws_command(o, {"ssm", "get-parameter", "--name", parameter, "--query",
                                 "Parameter.Value", "--output", "text"}),
                 "IMAGE_ID"};
    resolve.refusal = "pre-flight: --image " + o.image + ": SSM parameter " + parameter +
                      " was not found in " + o.region +
                      " (aws's message is above): check --image and --region, or give an AMI "
                      "id (--image ami-...); nothing was created";
    plan.steps.push_back(resolve);
    image_id = "${IMAGE_ID}";
  }
  Step available{"pre-flight: is image " + o.image + " available in " + o.region,
                 aws_command(o, {"ec2", "describe-images", "--image-ids", image_id, "--query",
                                 "Images[0].State", "--output", "text"}),
                 "IMAGE_STATE"};
  available.expect = "available";
  available.refusal =
      "pre-flight: image " + o.image + " is not available in " + o.region +
      " (ec2 describe-images finds no such image, or it is not 'available'; aws's message, if "
      "any, is above): an AMI lives in one region; check --image and --region, copy the image "
      "there (aws ec2 copy-image), or leave --image out for the default Deep Learning AMI; "
      "nothing was created";
  plan.steps.push_back(available);
}

}  // namespace

void add_aws_preflight(Plan& plan, const AwsClusterOptions& o) {
  auto read = [&](std::string what, std::vector<std::string> words, std::string capture) {
    plan.steps.push_back(
        preflight_step(std::move(what), aws_command(o, std::move(words)), std::move(capture)));
  };
  read("the availability zone of " + o.subnet,
       {"ec2", "describe-subnets", "--subnet-ids", o.subnet, "--query",
        "Subnets[0].AvailabilityZone", "--output", "text"},
       "SUBNET_AZ");
  read("is " + o.instance_type + " offered there",
       {"ec2", "describe-instance-type-offerings", "--location-type", "availability-zone",
        "--filters", "Name=instance-type,Values=" + o.instance_type,
        "Name=location,Values=${SUBNET_AZ}", "--output", "json"},
       "OFFERINGS_JSON");
  plan.steps.back().skip_if_empty = "SUBNET_AZ";
  read("EFA, network cards and vCPUs of " + o.instance_type,
       {"ec2", "describe-instance-types", "--instance-types", o.instance_type, "--output", "json"},
       "TYPES_JSON");
  read("the vCPU quota of On-Demand P instances",
       {"service-quotas", "get-service-quota", "--service-code", "ec2", "--quota-code",
        kAwsPQuotaCode, "--output", "json"},
       "QUOTA_JSON");
  if (!o.capacity_reservation.empty()) {
    read("capacity reservation " + o.capacity_reservation,
         {"ec2", "describe-capacity-reservations", "--capacity-reservation-ids",
          o.capacity_reservation, "--output", "json"},
         "RESERVATION_JSON");
  }
  plan.steps.back().check_what =
      "offered in the zone, EFA and network cards, quota covers --count, reservation usable";
  plan.steps.back().check = [o](const Vars& vars) {
    auto get = [&](const char* name) { return captured(vars, name); };
    report_findings(aws_preflight_findings(o, {get("SUBNET_AZ"), get("OFFERINGS_JSON"),
                                               get("TYPES_JSON"), get("QUOTA_JSON"),
                                               get("RESERVATION_JSON")}),
                    std::cerr);
  };
  add_image_check(plan, o);
}

}  // namespace dsx::cloud
