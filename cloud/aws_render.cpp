// Rendering the AWS files from the options, the facts table and the embedded scripts.
#include "cloud/aws_render.h"

#include <sstream>

#include "cloud/aws_launch_template.h"
#include "cloud/aws_plan.h"
#include "cloud/cluster_key.h"
#include "cloud/health_reference.h"
#include "cloud/instance_types.h"
#include "cloud/node_script.h"
#include "cloud/render_files.h"
#include "cloud/slurm_job.h"

namespace dsx::cloud {

std::string aws_user_data(const AwsClusterOptions& o, const std::string& public_key) {
  const auto& type = aws_instance_type(o.instance_type);
  ScriptSettings settings = {
      {"DSX_CLUSTER", o.cluster},
      {"DSX_REGION", o.region},
      {"DSX_INSTANCE_TYPE", o.instance_type},
      {"DSX_NODE_COUNT", std::to_string(o.count)},
      {"DSX_GPUS", std::to_string(type.gpus)},
      {"DSX_EFA_DEVICES", std::to_string(type.network_cards)},
      {"DSX_OS_USER", o.os_user},
      {"DSX_KEY_PARAMETER", aws_key_parameter(o)},
      {"DSX_CLUSTER_PUBKEY", public_key},
      {"DSX_PACKAGE", o.dsx_package},
      {"DSX_STORAGE", o.storage},
      {"DSX_SHARED_DIR", o.shared_dir},
      {"DSX_HEALTH_BENCH", std::string(health_bench(o.instance_type).args)},
  };
  return render_node_script("dsx node set-up for AWS cluster " + o.cluster, settings,
                            "aws/user-data.sh", /*strip_comments=*/true);
}

std::vector<std::string> render_aws(const AwsClusterOptions& o) {
  validate(o);
  const auto& type = aws_instance_type(o.instance_type);
  std::string public_key = ensure_cluster_key(o.out_dir, "dsx-" + o.cluster);
  std::string user_data = aws_user_data(o, public_key);
  std::string sg = aws_security_group_id(o);
  std::vector<std::string> written = {o.out_dir + "/cluster_key", o.out_dir + "/cluster_key.pub"};
  auto write = [&](const std::string& path, const std::string& text, unsigned mode) {
    write_file_atomically(path, text, mode);
    written.push_back(path);
  };
  write(aws_launch_template_path(o), render_launch_template(o, sg, user_data), 0644);
  write(aws_user_data_path(o), user_data, 0755);
  std::ostringstream up, down;
  print_plan(up, aws_up_plan(o));
  print_plan(down, aws_down_plan(o));
  write(o.out_dir + "/aws/up.sh", up.str(), 0755);
  write(o.out_dir + "/aws/down.sh", down.str(), 0755);
  write(o.out_dir + "/slurm/dsx-train.sbatch", render_slurm_job(o.count, type.gpus), 0755);
  return written;
}

}  // namespace dsx::cloud
