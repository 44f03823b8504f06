// Interfaces per instance type, the launch template's structure, and the user data's encoding
// and size, asserted directly against shared/ref/cloud.md.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <set>

#include "cloud/aws_launch_template.h"
#include "cloud/aws_render.h"
#include "tests/cloud/temp_dir.h"
#include "tests/tools/run_command.h"
#include "cloud/instance_types.h"
#include "dsx/base64.h"
#include "dsx/error.h"

using namespace dsx::cloud;

namespace {

AwsClusterOptions options_for(const std::string& type) {
  AwsClusterOptions o;
  o.cluster = "run42";
  o.region = "us-east-1";
  o.instance_type = type;
  o.count = 4;
  o.subnet = "subnet-0aaa1111bbbb2222c";
  o.ssh_cidr = "10.0.0.0/16";
  return o;
}

constexpr const char* kPublicKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleExampleExampleExampleExampleExample dsx-run42";

rapidjson::Document parse(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse(json.c_str());
  EXPECT_FALSE(doc.HasParseError());
  return doc;
}

}  // namespace

TEST(CloudFacts, EfaCardsPerInstanceType) {
  EXPECT_EQ(aws_instance_type("p4d.24xlarge").network_cards, 4);
  EXPECT_EQ(aws_instance_type("p4de.24xlarge").network_cards, 4);
  EXPECT_EQ(aws_instance_type("p5.48xlarge").network_cards, 32);
  EXPECT_EQ(aws_instance_type("p5e.48xlarge").network_cards, 32);
  EXPECT_EQ(aws_instance_type("p5en.48xlarge").network_cards, 16);
  for (const auto& t : aws_instance_types()) {
    EXPECT_EQ(t.gpus, 8) << t.name;
    // Every instance here has 3200 Gbps of EFA except p4d/p4de (400).
    int total = t.network_cards * t.efa_gbps_per_card;
    EXPECT_EQ(total, t.name.substr(0, 3) == "p4d" ? 400 : 3200) << t.name;
  }
  EXPECT_THROW(aws_instance_type("p3dn.24xlarge"), dsx::Error);
}

TEST(CloudFacts, OneInterfacePerCardPrimaryCarriesTheAddress) {
  for (const auto& type : aws_instance_types()) {
    auto nics = efa_interfaces(type, /*efa_only=*/true);
    ASSERT_EQ(int(nics.size()), type.network_cards) << type.name;
    std::set<int> cards;
    for (size_t i = 0; i < nics.size(); ++i) {
      cards.insert(nics[i].network_card_index);
      EXPECT_EQ(nics[i].device_index, 0);
      EXPECT_EQ(nics[i].interface_type, i == 0 ? "efa" : "efa-only") << type.name << " card " << i;
    }
    EXPECT_EQ(int(cards.size()), type.network_cards) << "each card gets exactly one interface";
    EXPECT_EQ(*cards.begin(), 0);
    EXPECT_EQ(*cards.rbegin(), type.network_cards - 1);
  }
  // --no-efa-only: `efa` (EFA with ENA) everywhere, at DeviceIndex 1 on the secondary cards.
  auto with_ip = efa_interfaces(aws_instance_type("p4d.24xlarge"), /*efa_only=*/false);
  for (const auto& nic : with_ip) {
    EXPECT_EQ(nic.interface_type, "efa");
    EXPECT_EQ(nic.device_index, nic.network_card_index == 0 ? 0 : 1) << "card " << nic.network_card_index;
  }
}

TEST(CloudFacts, LaunchTemplateCarriesEveryPiece) {
  auto o = options_for("p5.48xlarge");
  o.key_name = "dsx-key";
  auto doc = parse(render_launch_template(o, "sg-0bbb", aws_user_data(o, kPublicKey)));
  EXPECT_STREQ(doc["InstanceType"].GetString(), "p5.48xlarge");
  EXPECT_STREQ(doc["ImageId"].GetString(), kDefaultAwsImage);
  EXPECT_STREQ(doc["KeyName"].GetString(), "dsx-key");
  EXPECT_STREQ(doc["IamInstanceProfile"]["Name"].GetString(), "dsx-run42-node");
  EXPECT_STREQ(doc["Placement"]["GroupName"].GetString(), "dsx-run42");
  EXPECT_FALSE(doc.HasMember("SecurityGroupIds")) << "groups belong in each interface";
  const auto& nics = doc["NetworkInterfaces"];
  ASSERT_EQ(nics.Size(), 32u);
  for (rapidjson::SizeType i = 0; i < nics.Size(); ++i) {
    EXPECT_EQ(nics[i]["NetworkCardIndex"].GetInt(), int(i));
    EXPECT_EQ(nics[i]["DeviceIndex"].GetInt(), 0);
    EXPECT_STREQ(nics[i]["InterfaceType"].GetString(), i == 0 ? "efa" : "efa-only");
    EXPECT_STREQ(nics[i]["SubnetId"].GetString(), "subnet-0aaa1111bbbb2222c");
    EXPECT_STREQ(nics[i]["Groups"][0].GetString(), "sg-0bbb");
    EXPECT_FALSE(nics[i].HasMember("AssociatePublicIpAddress"));
  }
  const auto& root = doc["BlockDeviceMappings"][0];
  EXPECT_STREQ(root["DeviceName"].GetString(), "/dev/sda1");
  EXPECT_EQ(root["Ebs"]["VolumeSize"].GetInt(), 500);
  EXPECT_STREQ(doc["MetadataOptions"]["HttpTokens"].GetString(), "required");
  EXPECT_STREQ(doc["CapacityReservationSpecification"]["CapacityReservationPreference"].GetString(),
               "open");
  EXPECT_FALSE(doc.HasMember("InstanceMarketOptions"));
  const auto& tags = doc["TagSpecifications"];
  ASSERT_GE(tags.Size(), 2u);
  EXPECT_STREQ(tags[0]["ResourceType"].GetString(), "instance");
  EXPECT_STREQ(tags[0]["Tags"][1]["Key"].GetString(), "dsx-cluster");
  EXPECT_STREQ(tags[0]["Tags"][1]["Value"].GetString(), "run42");
}

TEST(CloudFacts, CapacityReservationReplacesThePlacementGroup) {
  auto o = options_for("p4d.24xlarge");
  o.capacity_reservation = "cr-0123456789abcdef0";
  o.capacity_block = true;
  auto doc = parse(render_launch_template(o, "sg-0bbb", "#!/bin/bash\n"));
  EXPECT_FALSE(doc.HasMember("Placement"));
  EXPECT_STREQ(
      doc["CapacityReservationSpecification"]["CapacityReservationTarget"]["CapacityReservationId"]
          .GetString(),
      "cr-0123456789abcdef0");
  EXPECT_STREQ(doc["InstanceMarketOptions"]["MarketType"].GetString(), "capacity-block");
  EXPECT_EQ(doc["NetworkInterfaces"].Size(), 4u);
}

// The user data is the script in base64, gzipped first when the plain text would not fit (then
// gunzip must give the script back, as cloud-init unpacks it).
TEST(CloudFacts, UserDataIsBase64OfTheScriptWithinSixteenKilobytes) {
  for (const auto& type : aws_instance_types()) {
    auto o = options_for(std::string(type.name));
    o.dsx_package = "s3://my-bucket/dsx/dsx-0.1.0-ubuntu22.04.tar.gz";
    o.storage = "fsx-lustre";
    std::string script = aws_user_data(o, kPublicKey);
    auto doc = parse(render_launch_template(o, "sg-0bbb", script));
    std::string encoded = doc["UserData"].GetString();
    EXPECT_LE(encoded.size(), kAwsUserDataLimit) << type.name;
    std::string decoded = dsx::base64::decode_strict(encoded);
    if (decoded.rfind("\x1f\x8b", 0) == 0) {
      dsx::test::TempDir dir;
      dsx::test::write_text(dir / "user-data.gz", decoded);
      decoded = dsx::test::run_command("gzip -dc " + dir / "user-data.gz").output;
    } else {
      EXPECT_EQ(encoded.size(), (script.size() + 2) / 3 * 4);
    }
    EXPECT_EQ(decoded, script);
    EXPECT_EQ(script.rfind("#!/bin/bash\n", 0), 0u);
    EXPECT_NE(script.find("DSX_EFA_DEVICES=" + std::to_string(type.network_cards) + "\n"),
              std::string::npos);
  }
}

TEST(CloudFacts, OversizedUserDataIsRefusedWithTheLimit) {
  auto o = options_for("p5.48xlarge");
  // 13000 bytes that do not compress: over the limit in base64, gzipped or not.
  std::string script;
  for (uint32_t x = 12345; script.size() < 13000;) {
    x = x * 1103515245u + 12345u;
    script += char(x >> 24);
  }
  try {
    render_launch_template(o, "sg-0bbb", script);
    FAIL() << "expected the 16 KB limit to be enforced";
  } catch (const dsx::Error& e) {
    EXPECT_EQ(e.kind(), dsx::ErrorKind::Config);
    EXPECT_NE(std::string(e.what()).find("16384"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(render_launch_template(o, "sg-0bbb", std::string(12 * 1024, 'x')));
}

TEST(CloudFacts, Base64MatchesKnownVectors) {
  // RFC 4648 section 10.
  const char* vectors[][2] = {{"", ""},
                              {"f", "Zg=="},
                              {"fo", "Zm8="},
                              {"foo", "Zm9v"},
                              {"foob", "Zm9vYg=="},
                              {"fooba", "Zm9vYmE="},
                              {"foobar", "Zm9vYmFy"}};
  for (const auto& v : vectors) {
    EXPECT_EQ(dsx::base64::encode(v[0], dsx::base64::kStandard), v[1]);
    EXPECT_EQ(dsx::base64::decode_strict(v[1]), v[0]);
  }
  std::string all;
  for (int i = 0; i < 256; ++i) all += char(i);
  EXPECT_EQ(dsx::base64::decode_strict(dsx::base64::encode(all, dsx::base64::kStandard)), all);
  EXPECT_THROW(dsx::base64::decode_strict("Zm9"), dsx::Error);
  EXPECT_THROW(dsx::base64::decode_strict("Zm9*"), dsx::Error);
}

TEST(CloudFacts, GcpMachineTypes) {
  EXPECT_EQ(gcp_machine_type("a2-highgpu-8g").gpu_nics, 0);
  EXPECT_EQ(gcp_machine_type("a2-ultragpu-8g").gpu_nics, 0);
  EXPECT_EQ(gcp_machine_type("a2-megagpu-16g").gpus, 16);  // 16 A100s on one host: 16 slots
  EXPECT_EQ(gcp_machine_type("a2-megagpu-16g").gpudirect, GpuDirect::None);
  EXPECT_EQ(gcp_machine_type("a3-highgpu-8g").gpu_nics, 4);
  EXPECT_EQ(gcp_machine_type("a3-megagpu-8g").gpu_nics, 8);
  EXPECT_EQ(gcp_machine_type("a3-highgpu-8g").gpudirect, GpuDirect::Tcpx);
  EXPECT_EQ(gcp_machine_type("a3-megagpu-8g").gpudirect, GpuDirect::Tcpxo);
  EXPECT_EQ(gcp_machine_type("a2-highgpu-8g").gpudirect, GpuDirect::None);
  EXPECT_THROW(gcp_machine_type("n1-standard-8"), dsx::Error);
  for (const auto& t : gcp_machine_types()) {
    EXPECT_EQ(t.on_demand, t.name != "a3-ultragpu-8g") << t.name;
  }
}

TEST(CloudFacts, GcpA3UltraTalksRdmaOverEightMrdmaNics) {
  const auto& ultra = gcp_machine_type("a3-ultragpu-8g");
  EXPECT_EQ(ultra.gpu, "H200 141GB");
  EXPECT_EQ(ultra.gpus, 8);
  EXPECT_EQ(ultra.gpu_nics, 8);
  EXPECT_EQ(ultra.gpudirect, GpuDirect::Rdma);
  EXPECT_STREQ(to_string(ultra.gpudirect), "rdma");
  EXPECT_EQ(ultra.boot_disk_type, "hyperdisk-balanced") << "A3 Ultra boots from Hyperdisk only";
  EXPECT_FALSE(ultra.on_demand) << "capacity from a reservation or spot";
}

TEST(CloudFacts, GcpA4IsRefusedWithItsReasonAndTheRdmaTypeDsxSetsUp) {
  try {  // a machine GCP sells that dsx does not set up: named, with what to use instead
    gcp_machine_type("a4-highgpu-8g");
    FAIL() << "a4-highgpu-8g has no template";
  } catch (const dsx::Error& e) {
    EXPECT_EQ(e.kind(), dsx::ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("B200"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("a3-ultragpu-8g"), std::string::npos) << e.what();
  }
}
