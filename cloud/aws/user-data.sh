# shellcheck shell=bash
# AWS steps of the node script (EC2 user data, runs once as root at first boot): check EFA and
# the NCCL EFA plugin, set the fabric environment, mount NVMe, SSH between nodes, install dsx,
# wait for every node, write the hostfile, and tag the instance dsx-ready=yes.

imds() {
  local token
  token=$(curl -fsS --max-time 10 --retry 5 -X PUT http://169.254.169.254/latest/api/token \
    -H 'X-aws-ec2-metadata-token-ttl-seconds: 300')
  curl -fsS --max-time 10 --retry 5 -H "X-aws-ec2-metadata-token: $token" \
    "http://169.254.169.254/latest/meta-data/$1"
}
aws_cli() { aws --region "$DSX_REGION" --cli-connect-timeout 10 --cli-read-timeout 60 "$@"; }
report_status() {
  [[ -n ${INSTANCE_ID:-} ]] && aws_cli ec2 create-tags --resources "$INSTANCE_ID" --tags "Key=dsx-ready,Value=$1"
}
shared_source() { imds tags/instance/dsx-shared-source; }
# The Lustre client from AWS's FSx package repository, for this kernel, unless the image has it.
ensure_lustre_client() {
  command -v mount.lustre >/dev/null && return 0
  local codename keyring=/usr/share/keyrings/fsx-ubuntu-public-key.gpg
  codename=$(sed -n 's/^VERSION_CODENAME=//p' "$DSX_ROOT/etc/os-release")
  curl -fsSL --retry 5 https://fsx-lustre-client-repo-public-keys.s3.amazonaws.com/fsx-ubuntu-public-key.asc |
    gpg --dearmor >"$DSX_ROOT$keyring"
  echo "deb [signed-by=$keyring] https://fsx-lustre-client-repo.s3.amazonaws.com/ubuntu $codename main" \
    >"$DSX_ROOT/etc/apt/sources.list.d/fsxlustreclientrepo.list"
  { apt-get update -qq && apt-get install -y -qq "lustre-client-modules-$(uname -r)"; } ||
    fail "could not install the Lustre client for kernel $(uname -r) (docs/cloud.md section 6)"
}
my_ip() { imds local-ipv4; }
list_peer_states() {
  aws_cli ec2 describe-instances --output text \
    --filters "Name=tag:dsx-cluster,Values=$DSX_CLUSTER" Name=instance-state-name,Values=running \
    --query "Reservations[].Instances[].[PrivateIpAddress,InstanceId,Tags[?Key=='dsx-ready']|[0].Value,Tags[?Key=='dsx-health']|[0].Value]"
}
tag_health() {
  aws_cli ec2 create-tags --resources "$1" --tags "Key=dsx-busbw,Value=$2" "Key=dsx-busbw-all,Value=$3" "Key=dsx-health,Value=$4"
}
list_peer_ips() {
  aws_cli ec2 describe-instances --output text \
    --filters "Name=tag:dsx-cluster,Values=$DSX_CLUSTER" Name=instance-state-name,Values=running \
    --query 'Reservations[].Instances[].PrivateIpAddress'
}

export PATH="$DSX_ROOT/opt/amazon/efa/bin:/opt/amazon/efa/bin:$PATH"
step identity
INSTANCE_ID=$(imds instance-id)
log "instance $INSTANCE_ID ($DSX_INSTANCE_TYPE), cluster $DSX_CLUSTER"

step efa
efa_devices=$(fi_info -p efa -t FI_EP_RDM 2>/dev/null | grep -c '^provider: efa' || true)
((efa_devices > 0)) || fail "fi_info -p efa finds no EFA device: was the instance launched with EFA interfaces in an EFA-capable security group?"
((efa_devices == DSX_EFA_DEVICES)) || log "WARNING: $efa_devices of $DSX_EFA_DEVICES EFA devices: bandwidth will be lower (check the launch template)"

step nccl-efa-plugin
find_plugin() {
  local f
  for f in /opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so /opt/amazon/ofi-nccl/lib/libnccl-net.so \
    /opt/aws-ofi-nccl/lib/libnccl-net.so; do
    [[ -e $DSX_ROOT$f ]] && { echo "$f"; return 0; }
  done
  return 1
}
if ! plugin=$(find_plugin); then
  log "aws-ofi-nccl not found: running the EFA installer, which ships it"
  tmp=$(mktemp -d)
  curl -fsSL --max-time 600 --retry 5 -o "$tmp/efa.tar.gz" https://efa-installer.amazonaws.com/aws-efa-installer-latest.tar.gz
  tar -xzf "$tmp/efa.tar.gz" -C "$tmp"
  (cd "$tmp/aws-efa-installer" && ./efa_installer.sh -y)
  plugin=$(find_plugin) || fail "the NCCL EFA plugin (aws-ofi-nccl) is still missing after the EFA installer"
fi
log "NCCL EFA plugin: $plugin"

step gpus
check_gpus "$DSX_GPUS"
raise_limits

step environment
# shared/ref/cloud.md 1.2.9: the provider, GPUDirect RDMA, no huge pages (fork ENOMEM), the
# socket interfaces NCCL may bootstrap on, and the EFA/plugin libraries first on the path.
plugin_dir=$(dirname "$plugin")
env_set FI_PROVIDER efa
env_set FI_EFA_USE_DEVICE_RDMA 1
env_set FI_EFA_USE_HUGE_PAGE 0
env_set NCCL_SOCKET_IFNAME '^docker,lo,veth'
[[ ${plugin##*/} == libnccl-net-ofi.so ]] && env_set NCCL_NET_PLUGIN ofi
env_set LD_LIBRARY_PATH "/opt/amazon/efa/lib:$plugin_dir:/usr/local/cuda/lib64"
[[ -e $DSX_ROOT$plugin_dir/libnccl-ofi-tuner.so ]] && env_set NCCL_TUNER_PLUGIN "$plugin_dir/libnccl-ofi-tuner.so"
export_env_to_shells

step nvme
mount_scratch "$DSX_ROOT"/dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_*

step ssh
private_key=$(aws_cli ssm get-parameter --name "$DSX_KEY_PARAMETER" --with-decryption \
  --query Parameter.Value --output text)
setup_ssh "$DSX_OS_USER" "$DSX_CLUSTER_PUBKEY" "$private_key"

join_cluster "$(imds local-ipv4)"
