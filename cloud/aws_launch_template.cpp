// Builds the LaunchTemplateData object with RapidJSON.
#include "cloud/aws_launch_template.h"

#include <rapidjson/document.h>
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include "cloud/aws_storage.h"
#include "cloud/gzip.h"
#include "dsx/base64.h"
#include "dsx/error.h"

namespace dsx::cloud {

namespace {

using rapidjson::Value;
using Allocator = rapidjson::Document::AllocatorType;

Value str(const std::string& s, Allocator& a) {
  return Value(s.c_str(), rapidjson::SizeType(s.size()), a);
}

Value tags_for(const char* resource_type, const AwsClusterOptions& o, Allocator& a) {
  Value tags(rapidjson::kArrayType);
  auto add = [&](const char* key, const std::string& value) {
    Value tag(rapidjson::kObjectType);
    tag.AddMember("Key", Value(key, a), a);
    tag.AddMember("Value", str(value, a), a);
    tags.PushBack(tag, a);
  };
  add("Name", aws_resource_name(o));
  add("dsx-cluster", o.cluster);
  // Where the node mounts the shared storage from, filled in by up once it exists.
  if (aws_has_storage(o) && std::string(resource_type) == "instance")
    add("dsx-shared-source", "${SHARED_SOURCE}");
  Value spec(rapidjson::kObjectType);
  spec.AddMember("ResourceType", Value(resource_type, a), a);
  spec.AddMember("Tags", tags, a);
  return spec;
}

Value network_interfaces(const AwsClusterOptions& o, const std::string& sg, Allocator& a) {
  Value list(rapidjson::kArrayType);
  for (const auto& nic : efa_interfaces(aws_instance_type(o.instance_type), o.efa_only)) {
    Value entry(rapidjson::kObjectType);
    entry.AddMember("NetworkCardIndex", nic.network_card_index, a);
    entry.AddMember("DeviceIndex", nic.device_index, a);
    entry.AddMember("InterfaceType", str(nic.interface_type, a), a);
    entry.AddMember("SubnetId", str(o.subnet, a), a);
    Value groups(rapidjson::kArrayType);
    groups.PushBack(str(sg, a), a);
    entry.AddMember("Groups", groups, a);
    entry.AddMember("DeleteOnTermination", true, a);
    list.PushBack(entry, a);
  }
  return list;
}

Value root_volume(const AwsClusterOptions& o, Allocator& a) {
  Value ebs(rapidjson::kObjectType);
  ebs.AddMember("VolumeSize", o.root_volume_gb, a);
  ebs.AddMember("VolumeType", "gp3", a);
  ebs.AddMember("Iops", 10000, a);
  ebs.AddMember("Throughput", 500, a);
  ebs.AddMember("DeleteOnTermination", true, a);
  ebs.AddMember("Encrypted", true, a);
  Value mapping(rapidjson::kObjectType);
  mapping.AddMember("DeviceName", str(o.root_device, a), a);
  mapping.AddMember("Ebs", ebs, a);
  Value list(rapidjson::kArrayType);
  list.PushBack(mapping, a);
  return list;
}

// Targeted reservation, or on-demand capacity from any open reservation first.
Value capacity(const AwsClusterOptions& o, Allocator& a) {
  Value spec(rapidjson::kObjectType);
  if (o.capacity_reservation.empty()) {
    spec.AddMember("CapacityReservationPreference", "open", a);
  } else {
    Value target(rapidjson::kObjectType);
    target.AddMember("CapacityReservationId", str(o.capacity_reservation, a), a);
    spec.AddMember("CapacityReservationTarget", target, a);
  }
  return spec;
}

}  // namespace

std::vector<EfaInterface> efa_interfaces(const AwsInstanceType& type, bool efa_only) {
  std::vector<EfaInterface> list;
  list.push_back({0, 0, "efa"});
  // Secondary cards: an `efa-only` interface at device 0, or, with an address, an `efa` (EFA with
  // ENA) interface at device 1 as AWS documents it for secondary cards.
  const bool without_ip = efa_only && type.supports_efa_only;
  for (int card = 1; card < type.network_cards; ++card) {
    list.push_back({card, without_ip ? 0 : 1, without_ip ? "efa-only" : "efa"});
  }
  return list;
}

std::string aws_user_data_field(const std::string& script) {
  std::string user_data = base64::encode(script, base64::kStandard);
  if (user_data.size() > kAwsUserDataLimit && gzip_available()) {
    user_data = base64::encode(gzip(script), base64::kStandard);  // cloud-init unpacks gzip user data
  }
  if (user_data.size() > kAwsUserDataLimit) {
    throw Error(ErrorKind::Config,
                "the user data is " + std::to_string(user_data.size()) +
                    " bytes of base64" + (gzip_available() ? " after gzip" : "") +
                    ", over EC2's limit of " + std::to_string(kAwsUserDataLimit) +
                    ": shorten the node script (cloud/aws/user-data.sh) or fetch parts from S3");
  }
  return user_data;
}

std::string render_launch_template(const AwsClusterOptions& o, const std::string& sg,
                                   const std::string& user_data_script) {
  std::string user_data = aws_user_data_field(user_data_script);
  rapidjson::Document doc(rapidjson::kObjectType);
  auto& a = doc.GetAllocator();
  doc.AddMember("ImageId", str(o.image, a), a);
  doc.AddMember("InstanceType", str(o.instance_type, a), a);
  if (!o.key_name.empty()) doc.AddMember("KeyName", str(o.key_name, a), a);
  Value profile(rapidjson::kObjectType);
  profile.AddMember(
      "Name", str(o.instance_profile.empty() ? aws_node_role_name(o) : o.instance_profile, a), a);
  doc.AddMember("IamInstanceProfile", profile, a);
  if (aws_uses_placement_group(o)) {
    Value placement(rapidjson::kObjectType);
    placement.AddMember("GroupName", str(aws_resource_name(o), a), a);
    doc.AddMember("Placement", placement, a);
  }
  doc.AddMember("NetworkInterfaces", network_interfaces(o, sg, a), a);
  doc.AddMember("BlockDeviceMappings", root_volume(o, a), a);
  doc.AddMember("UserData", str(user_data, a), a);
  Value metadata(rapidjson::kObjectType);
  metadata.AddMember("HttpTokens", "required", a);
  metadata.AddMember("HttpEndpoint", "enabled", a);
  metadata.AddMember("HttpPutResponseHopLimit", 2, a);  // containers on the node reach IMDSv2
  // The node reads its dsx-shared-source tag from instance metadata (tags/instance/...).
  if (aws_has_storage(o)) metadata.AddMember("InstanceMetadataTags", "enabled", a);
  doc.AddMember("MetadataOptions", metadata, a);
  doc.AddMember("CapacityReservationSpecification", capacity(o, a), a);
  if (o.capacity_block) {
    Value market(rapidjson::kObjectType);
    market.AddMember("MarketType", "capacity-block", a);
    doc.AddMember("InstanceMarketOptions", market, a);
  }
  Value tag_specs(rapidjson::kArrayType);
  tag_specs.PushBack(tags_for("instance", o, a), a);
  tag_specs.PushBack(tags_for("volume", o, a), a);
  tag_specs.PushBack(tags_for("network-interface", o, a), a);
  doc.AddMember("TagSpecifications", tag_specs, a);

  rapidjson::StringBuffer buffer;
  rapidjson::PrettyWriter<rapidjson::StringBuffer> writer(buffer);
  writer.SetIndent(' ', 2);
  doc.Accept(writer);
  return std::string(buffer.GetString(), buffer.GetSize()) + "\n";
}

}  // namespace dsx::cloud
