// GCP pre-flight: the read-only gcloud calls and the checks on their JSON.
#include "cloud/gcp_preflight.h"

#include <iostream>

#include "cloud/cli_json.h"
#include "cloud/gcp_plan.h"
#include "cloud/instance_types.h"

namespace dsx::cloud {

namespace {

using Findings = std::vector<Finding>;

void check_machine(const GcpClusterOptions& o, const GcpPreflightAnswers& a, Findings& out) {
  if (a.machine_json.empty()) {
    out.push_back({true, o.machine_type + " is not offered in zone " + o.zone +
                             " (or the call failed: its message is above): pick a zone from "
                             "gcloud compute machine-types list --filter=name=" + o.machine_type});
    return;
  }
  auto doc = parse_cli_json(a.machine_json, "gcloud compute machine-types describe");
  const int gpus = int(number_at(doc, "accelerators.0.guestAcceleratorCount", 0));
  const int expected = gcp_machine_type(o.machine_type).gpus;
  if (gpus != expected) {
    out.push_back({false, o.machine_type + " in " + o.zone + " reports " + std::to_string(gpus) +
                              " GPUs; dsx's templates expect " + std::to_string(expected)});
  }
}

void check_quota(const GcpClusterOptions& o, const GcpPreflightAnswers& a, Findings& out) {
  if (!o.reservation.empty()) return;  // reserved VMs use the quota the reservation holds
  const std::string metric = gcp_gpu_quota_metric(o);
  const std::string region = gcp_region(o);
  const int need = o.count * gcp_machine_type(o.machine_type).gpus;
  const auto doc = a.region_json.empty() ? rapidjson::Document()
                                         : parse_cli_json(a.region_json,
                                                          "gcloud compute regions describe");
  const auto* quotas = a.region_json.empty() ? nullptr : json_at(doc, "quotas");
  if (quotas && quotas->IsArray()) {
    for (const auto& q : quotas->GetArray()) {
      if (string_at(q, "metric") != metric) continue;
      const double limit = number_at(q, "limit", 0), usage = number_at(q, "usage", 0);
      if (limit - usage >= need) return;
      out.push_back({true, std::to_string(o.count) + " x " + o.machine_type + " need " +
                               std::to_string(need) + " " + metric + " in " + region +
                               "; the quota is " + std::to_string(int(limit)) + " with " +
                               std::to_string(int(usage)) +
                               " in use: request more (IAM & Admin > Quotas), use a "
                               "reservation, or another region"});
      return;
    }
  }
  out.push_back({false, "region " + region + " lists no quota " + metric +
                            ": check the GPU quota by hand (IAM & Admin > Quotas), and the "
                            "global GPUS_ALL_REGIONS"});
}

void check_reservation(const GcpClusterOptions& o, const GcpPreflightAnswers& a, Findings& out) {
  if (o.reservation.empty() || o.reservation.find('/') != std::string::npos) return;
  const std::string name = "reservation " + o.reservation;
  if (a.reservation_json.empty()) {
    out.push_back({true, name + " was not found in " + o.zone +
                             " (the error is above): check --reservation and --zone"});
    return;
  }
  auto doc = parse_cli_json(a.reservation_json, "gcloud compute reservations describe");
  const std::string status = string_at(doc, "status");
  if (status != "READY") {
    out.push_back({true, name + " is " + status + ", not READY: wait until it is allocated"});
  }
  const std::string machine = string_at(doc, "specificReservation.instanceProperties.machineType");
  if (!machine.empty() && machine != o.machine_type) {
    out.push_back({true, name + " holds " + machine + ", not " + o.machine_type +
                             ": pass --machine-type " + machine});
  }
  const int free = int(number_at(doc, "specificReservation.count", 0) -
                       number_at(doc, "specificReservation.inUseCount", 0));
  if (free < o.count) {
    out.push_back({true, name + " has " + std::to_string(free) + " VMs free, " +
                             std::to_string(o.count) + " asked for: lower --count or enlarge it"});
  }
}

}  // namespace

std::string gcp_gpu_quota_metric(const GcpClusterOptions& o) {
  const std::string& m = o.machine_type;
  std::string metric = m == "a2-ultragpu-8g"                   ? "NVIDIA_A100_80GB_GPUS"
                       : m.rfind("a2-", 0) == 0                ? "NVIDIA_A100_GPUS"
                       : m == "a3-megagpu-8g"                  ? "NVIDIA_H100_MEGA_GPUS"
                       : m == "a3-ultragpu-8g"                 ? "NVIDIA_H200_GPUS"
                                                               : "NVIDIA_H100_GPUS";
  return o.spot ? "PREEMPTIBLE_" + metric : metric;
}

std::vector<Finding> gcp_preflight_findings(const GcpClusterOptions& o,
                                            const GcpPreflightAnswers& a) {
  Findings out;
  check_machine(o, a, out);
  check_quota(o, a, out);
  check_reservation(o, a, out);
  return out;
}

namespace {

// The image (or the family's newest) must be READY before anything is made, else the bulk create
// fails after the networks, rules and Filestore exist. A refusal: the printed script checks it
// too. A family is looked up in --image-project, a given --image in the cluster's project, as
// the instance template does.
void add_image_check(Plan& plan, const GcpClusterOptions& o) {
  GcpClusterOptions in_image_project = o;
  in_image_project.project = o.image_project;
  Step step =
      o.image.empty()
          ? Step{"pre-flight: the newest image of family " + o.image_family + " in " +
                     o.image_project,
                 gcloud_command(in_image_project, {"compute", "images", "describe-from-family",
                                                   o.image_family, "--format=value(status)"}),
                 "IMAGE_STATUS"}
          : Step{"pre-flight: is image " + o.image + " READY in " + o.project,
                 gcloud_command(
                     o, {"compute", "images", "describe", o.image, "--format=value(status)"}),
                 "IMAGE_STATUS"};
  step.expect = "READY";
  step.refusal =
      o.image.empty()
          ? "pre-flight: image family " + o.image_family + " has no READY image in project " +
                o.image_project +
                " (gcloud's message, if any, is above): check --image-family "
                "and --image-project (gcloud compute images list --project " +
                o.image_project + "), or give --image; nothing was created"
          : "pre-flight: image " + o.image + " is not READY in project " + o.project +
                " (gcloud's message, if any, is above): check --image (an image of another "
                "project as projects/P/global/images/NAME), or use --image-family; nothing was "
                "created";
  plan.steps.push_back(step);
}

}  // namespace

void add_gcp_preflight(Plan& plan, const GcpClusterOptions& o) {
  auto read = [&](std::string what, std::vector<std::string> words, std::string capture) {
    plan.steps.push_back(
        preflight_step(std::move(what), gcloud_command(o, std::move(words)), std::move(capture)));
  };
  read("does " + o.zone + " offer " + o.machine_type,
       {"compute", "machine-types", "describe", o.machine_type, "--zone=" + o.zone,
        "--format=json"},
       "MACHINE_JSON");
  read("the GPU quotas of " + gcp_region(o),
       {"compute", "regions", "describe", gcp_region(o), "--format=json"}, "REGION_JSON");
  if (!o.reservation.empty() && o.reservation.find('/') == std::string::npos) {
    read("reservation " + o.reservation,
         {"compute", "reservations", "describe", o.reservation, "--zone=" + o.zone,
          "--format=json"},
         "RESERVATION_JSON");
  }
  plan.steps.back().check_what = "machine type in the zone, " + gcp_gpu_quota_metric(o) +
                                 " quota covers --count, reservation READY and large enough";
  plan.steps.back().check = [o](const Vars& vars) {
    auto get = [&](const char* name) { return captured(vars, name); };
    report_findings(gcp_preflight_findings(o, {get("MACHINE_JSON"), get("REGION_JSON"),
                                               get("RESERVATION_JSON")}),
                    std::cerr);
  };
  add_image_check(plan, o);
}

}  // namespace dsx::cloud
