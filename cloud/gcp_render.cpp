// Rendering the GCP files from the options, the facts table and the embedded scripts.
#include "cloud/gcp_render.h"

#include <sstream>

#include "cloud/cluster_key.h"
#include "cloud/health_reference.h"
#include "cloud/gcp_plan.h"
#include "cloud/node_script.h"
#include "cloud/render_files.h"
#include "cloud/slurm_job.h"

namespace dsx::cloud {

std::string gcp_startup_script(const GcpClusterOptions& o, const std::string& public_key) {
  const auto& type = gcp_machine_type(o.machine_type);
  ScriptSettings settings = {
      {"DSX_CLUSTER", o.cluster},
      {"DSX_PROJECT", o.project},
      {"DSX_ZONE", o.zone},
      {"DSX_MACHINE_TYPE", o.machine_type},
      {"DSX_NODE_COUNT", std::to_string(o.count)},
      {"DSX_GPUS", std::to_string(type.gpus)},
      {"DSX_GPU_NICS", std::to_string(type.gpu_nics)},
      {"DSX_GPUDIRECT", to_string(type.gpudirect)},
      {"DSX_PLUGIN_IMAGE", gcp_plugin_image(o)},
      {"DSX_RXDM_IMAGE", gcp_rxdm_image(o)},
      {"DSX_OS_USER", o.os_user},
      {"DSX_KEY_SECRET", gcp_key_secret(o)},
      {"DSX_CLUSTER_PUBKEY", public_key},
      {"DSX_PACKAGE", o.dsx_package},
      {"DSX_STORAGE", o.storage},
      {"DSX_SHARED_DIR", o.shared_dir},
      {"DSX_HEALTH_BENCH", std::string(health_bench(o.machine_type).args)},
  };
  return render_node_script("dsx node set-up for GCP cluster " + o.cluster, settings,
                            "gcp/startup.sh", /*strip_comments=*/false);
}

std::vector<std::string> render_gcp(const GcpClusterOptions& o) {
  validate(o);
  const auto& type = gcp_machine_type(o.machine_type);
  std::string public_key = ensure_cluster_key(o.out_dir, "dsx-" + o.cluster);
  std::vector<std::string> written = {o.out_dir + "/cluster_key", o.out_dir + "/cluster_key.pub"};
  auto write = [&](const std::string& path, const std::string& text, unsigned mode) {
    write_file_atomically(path, text, mode);
    written.push_back(path);
  };
  write(gcp_startup_script_path(o), gcp_startup_script(o, public_key), 0755);
  std::ostringstream up, down;
  print_plan(up, gcp_up_plan(o));
  print_plan(down, gcp_down_plan(o));
  write(o.out_dir + "/gcp/up.sh", up.str(), 0755);
  write(o.out_dir + "/gcp/down.sh", down.str(), 0755);
  write(o.out_dir + "/slurm/dsx-train.sbatch", render_slurm_job(o.count, type.gpus), 0755);
  return written;
}

}  // namespace dsx::cloud
