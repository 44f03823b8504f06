// AWS plans. Every call names the region and tags what it creates with dsx-cluster=<cluster>.
#include "cloud/aws_plan.h"

#include "cloud/aws_preflight.h"
#include "cloud/aws_storage.h"

namespace dsx::cloud {

namespace {

std::vector<std::string> aws(const AwsClusterOptions& o, std::vector<std::string> words) {
  return aws_command(o, std::move(words));
}

std::string tag_spec(const char* resource_type, const AwsClusterOptions& o) {
  return std::string("ResourceType=") + resource_type +
         ",Tags=[{Key=Name,Value=" + aws_resource_name(o) +
         "},{Key=dsx-cluster,Value=" + o.cluster + "}]";
}

std::string cluster_filter(const AwsClusterOptions& o) {
  return "Name=tag:dsx-cluster,Values=" + o.cluster;
}

// EFA needs all traffic to and from the group itself; SSH comes only from the user's CIDR.
std::string ingress_rules(const AwsClusterOptions& o) {
  return R"([{"IpProtocol":"-1","UserIdGroupPairs":[{"GroupId":"${SG_ID}","Description":"dsx: all traffic between nodes for EFA"}]},)"
         R"({"IpProtocol":"tcp","FromPort":22,"ToPort":22,"IpRanges":[{"CidrIp":")" +
         o.ssh_cidr + R"(","Description":"dsx: ssh"}]}])";
}

constexpr const char* kEgressSelf =
    R"([{"IpProtocol":"-1","UserIdGroupPairs":[{"GroupId":"${SG_ID}","Description":"dsx: all traffic between nodes for EFA"}]}])";

constexpr const char* kAssumeRole =
    R"({"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]})";

// What the node script calls: list peers, tag itself ready, read the cluster key, fetch dsx.
std::string node_policy(const AwsClusterOptions& o) {
  std::string policy =
      R"({"Version":"2012-10-17","Statement":[)"
      R"({"Effect":"Allow","Action":["ec2:DescribeInstances"],"Resource":"*"},)"
      R"({"Effect":"Allow","Action":["ec2:CreateTags"],"Resource":"arn:aws:ec2:*:*:instance/*"},)"
      R"({"Effect":"Allow","Action":["ssm:GetParameter"],"Resource":"arn:aws:ssm:)" +
      o.region + ":*:parameter" + aws_key_parameter(o) + R"("})";
  if (o.dsx_package.rfind("s3://", 0) == 0) {
    policy += R"(,{"Effect":"Allow","Action":["s3:GetObject"],"Resource":"arn:aws:s3:::)" +
              o.dsx_package.substr(5) + R"("})";
  }
  return policy + "]}";
}

void add_security_group(Plan& plan, const AwsClusterOptions& o) {
  const std::string name = aws_resource_name(o);
  plan.steps.push_back({"find the VPC of subnet " + o.subnet,
                        aws(o, {"ec2", "describe-subnets", "--subnet-ids", o.subnet, "--query",
                                "Subnets[0].VpcId", "--output", "text"}),
                        "VPC_ID"});
  plan.steps.push_back(
      {"create security group " + name,
       aws(o, {"ec2", "create-security-group", "--group-name", name, "--description",
               "dsx cluster " + o.cluster + ": EFA traffic between nodes, SSH from " + o.ssh_cidr,
               "--vpc-id", "${VPC_ID}", "--tag-specifications", tag_spec("security-group", o),
               "--query", "GroupId", "--output", "text"}),
       "SG_ID"});
  plan.steps.push_back({"allow all traffic from the group itself and SSH from " + o.ssh_cidr,
                        aws(o, {"ec2", "authorize-security-group-ingress", "--group-id", "${SG_ID}",
                                "--ip-permissions", ingress_rules(o)})});
  plan.steps.push_back({"allow all traffic to the group itself",
                        aws(o, {"ec2", "authorize-security-group-egress", "--group-id", "${SG_ID}",
                                "--ip-permissions", kEgressSelf})});
}

void add_instance_profile(Plan& plan, const AwsClusterOptions& o) {
  const std::string role = aws_node_role_name(o);
  plan.steps.push_back(
      {"create the node role " + role,
       aws(o, {"iam", "create-role", "--role-name", role, "--assume-role-policy-document",
               kAssumeRole, "--tags", "Key=dsx-cluster,Value=" + o.cluster})});
  plan.steps.push_back({"let nodes use Session Manager (access without a bastion)",
                        aws(o, {"iam", "attach-role-policy", "--role-name", role, "--policy-arn",
                                "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"})});
  plan.steps.push_back({"let nodes list peers, tag themselves and read the cluster key",
                        aws(o, {"iam", "put-role-policy", "--role-name", role, "--policy-name",
                                "dsx-node", "--policy-document", node_policy(o)})});
  plan.steps.push_back(
      {"create instance profile " + role,
       aws(o, {"iam", "create-instance-profile", "--instance-profile-name", role})});
  plan.steps.push_back({"put the role in the profile",
                        aws(o, {"iam", "add-role-to-instance-profile", "--instance-profile-name",
                                role, "--role-name", role})});
  plan.steps.push_back(
      {"wait until IAM shows the profile",
       aws(o, {"iam", "wait", "instance-profile-exists", "--instance-profile-name", role})});
}

}  // namespace

std::vector<std::string> aws_command(const AwsClusterOptions& o, std::vector<std::string> words) {
  std::vector<std::string> argv = {"aws", "--region", o.region};
  argv.insert(argv.end(), words.begin(), words.end());
  return argv;
}

std::string aws_launch_template_path(const AwsClusterOptions& o) {
  return o.out_dir + "/aws/launch-template.json";
}
std::string aws_user_data_path(const AwsClusterOptions& o) {
  return o.out_dir + "/aws/user-data.sh";
}

Plan aws_up_plan(const AwsClusterOptions& o) {
  Plan plan{"dsx cloud aws up: " + std::to_string(o.count) + " x " + o.instance_type + " in " +
                o.region + " as cluster " + o.cluster,
            {}};
  const std::string name = aws_resource_name(o);
  add_aws_preflight(plan, o);
  if (aws_creates_security_group(o)) add_security_group(plan, o);
  add_aws_storage_create(plan, o);
  if (aws_uses_placement_group(o)) {
    plan.steps.push_back(
        {"create cluster placement group " + name,
         aws(o, {"ec2", "create-placement-group", "--group-name", name, "--strategy", "cluster",
                 "--tag-specifications", tag_spec("placement-group", o)})});
  }
  if (aws_creates_instance_profile(o)) add_instance_profile(plan, o);
  plan.steps.push_back(
      {"store the cluster SSH key for the nodes (SecureString)",
       aws(o, {"ssm", "put-parameter", "--name", aws_key_parameter(o), "--type", "SecureString",
               "--overwrite", "--value", "file://" + o.out_dir + "/cluster_key"})});
  plan.steps.back().quiet = true;
  add_aws_storage_wait(plan, o);
  Step template_step{
      "create launch template " + name,
      aws(o, {"ec2", "create-launch-template", "--launch-template-name", name,
              "--launch-template-data", "file://" + o.out_dir + "/aws/launch-template.filled.json",
              "--tag-specifications", tag_spec("launch-template", o)})};
  template_step.fill_from = aws_launch_template_path(o);
  template_step.fill_to = o.out_dir + "/aws/launch-template.filled.json";
  plan.steps.push_back(template_step);
  plan.steps.push_back({"launch all " + std::to_string(o.count) + " nodes in one request",
                        aws(o, {"ec2", "run-instances", "--launch-template",
                                "LaunchTemplateName=" + name + ",Version=$Latest", "--count",
                                std::to_string(o.count) + ":" + std::to_string(o.count), "--query",
                                "Instances[].InstanceId", "--output", "text"}),
                        "INSTANCE_IDS"});
  plan.steps.back().capture_is_list = true;
  Step wait{"wait until every node is running",
            aws(o, {"ec2", "wait", "instance-running", "--instance-ids", "${INSTANCE_IDS}"})};
  wait.timeout_s = 1200;
  plan.steps.push_back(wait);
  return plan;
}

Plan aws_down_plan(const AwsClusterOptions& o) {
  Plan plan{"dsx cloud aws down: cluster " + o.cluster + " in " + o.region, {}};
  const std::string name = aws_resource_name(o);
  plan.steps.push_back(
      {"find the cluster's instances",
       aws(o, {"ec2", "describe-instances", "--filters", cluster_filter(o),
               "Name=instance-state-name,Values=pending,running,stopping,stopped", "--query",
               "Reservations[].Instances[].InstanceId", "--output", "text"}),
       "INSTANCE_IDS"});
  plan.steps.back().capture_is_list = true;
  Step terminate{"terminate them",
                 aws(o, {"ec2", "terminate-instances", "--instance-ids", "${INSTANCE_IDS}"})};
  terminate.quiet = true;
  terminate.skip_if_empty = "INSTANCE_IDS";
  plan.steps.push_back(terminate);
  Step wait{"wait until they are gone (groups in use cannot be deleted)",
            aws(o, {"ec2", "wait", "instance-terminated", "--instance-ids", "${INSTANCE_IDS}"})};
  wait.skip_if_empty = "INSTANCE_IDS";
  wait.timeout_s = 1200;
  plan.steps.push_back(wait);
  auto may_fail = [&](std::string what, std::vector<std::string> words) {
    Step s{std::move(what), aws(o, std::move(words))};
    s.may_fail = true;
    plan.steps.push_back(s);
  };
  may_fail("delete launch template " + name,
           {"ec2", "delete-launch-template", "--launch-template-name", name});
  if (aws_uses_placement_group(o)) {
    may_fail("delete placement group " + name,
             {"ec2", "delete-placement-group", "--group-name", name});
  }
  add_aws_storage_delete(plan, o);
  // A kept file system's interfaces stay in the group, so the group stays too.
  if (aws_creates_security_group(o) && !(o.keep_storage && aws_has_storage(o))) {
    plan.steps.push_back(
        {"find security group " + name,
         aws(o, {"ec2", "describe-security-groups", "--filters", "Name=group-name,Values=" + name,
                 cluster_filter(o), "--query", "SecurityGroups[0].GroupId", "--output", "text"}),
         "SG_ID"});
    Step sg{"delete security group " + name,
            aws(o, {"ec2", "delete-security-group", "--group-id", "${SG_ID}"})};
    sg.skip_if_empty = "SG_ID";
    sg.may_fail = true;
    plan.steps.push_back(sg);
  }
  may_fail("delete the cluster key", {"ssm", "delete-parameter", "--name", aws_key_parameter(o)});
  if (aws_creates_instance_profile(o)) {
    const std::string role = aws_node_role_name(o);
    may_fail("take the role out of the profile",
             {"iam", "remove-role-from-instance-profile", "--instance-profile-name", role,
              "--role-name", role});
    may_fail("delete instance profile " + role,
             {"iam", "delete-instance-profile", "--instance-profile-name", role});
    may_fail("delete the node policy",
             {"iam", "delete-role-policy", "--role-name", role, "--policy-name", "dsx-node"});
    may_fail("detach the Session Manager policy",
             {"iam", "detach-role-policy", "--role-name", role, "--policy-arn",
              "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"});
    may_fail("delete role " + role, {"iam", "delete-role", "--role-name", role});
  }
  return plan;
}

Step aws_describe_step(const AwsClusterOptions& o) {
  return {"list the cluster's instances",
          aws(o, {"ec2", "describe-instances", "--filters", cluster_filter(o), "--output", "json"}),
          "DESCRIBE_JSON"};
}

}  // namespace dsx::cloud
