# shellcheck shell=bash
# GCP steps of the node script (the instance template's startup-script; runs as root at every
# boot, so each step is safe to repeat): GPUs, limits, local SSD, the NIC names, GPUDirect-TCPX
# (A3 High) or TCPXO (A3 Mega) with their receive-datapath manager or GPUDirect RDMA with the
# gIB plugin (A3 Ultra), NCCL environment, SSH between nodes, dsx, peers and the hostfile, and
# the label dsx-ready=yes.

md() {
  curl -fsS --max-time 10 --retry 5 -H 'Metadata-Flavor: Google' \
    "http://metadata.google.internal/computeMetadata/v1/$1"
}
report_status() {
  [[ -n ${NODE_NAME:-} ]] && gcloud compute instances add-labels "$NODE_NAME" --quiet \
    --project="$DSX_PROJECT" --zone="$DSX_ZONE" --labels="dsx-ready=$1"
}
shared_source() { md instance/attributes/dsx-shared-source; }
my_ip() { md instance/network-interfaces/0/ip; }
list_peer_states() {
  gcloud compute instances list --quiet --project="$DSX_PROJECT" \
    --filter="labels.dsx-cluster=$DSX_CLUSTER AND status=RUNNING" \
    --format='value(networkInterfaces[0].networkIP,name,labels.dsx-ready,labels.dsx-health)'
}
# Label values take no '.': 78.5 GB/s is written 78_5.
tag_health() {
  gcloud compute instances add-labels "$1" --quiet --project="$DSX_PROJECT" --zone="$DSX_ZONE" \
    --labels="dsx-busbw=${2//./_},dsx-busbw-all=${3//./_},dsx-health=$4"
}
list_peer_ips() {
  gcloud compute instances list --quiet --project="$DSX_PROJECT" \
    --filter="labels.dsx-cluster=$DSX_CLUSTER AND status=RUNNING" \
    --format='value(networkInterfaces[0].networkIP)'
}
# nic_name I: the kernel name of the I-th network interface, found by its MAC address.
nic_name() {
  local mac
  mac=$(md "instance/network-interfaces/$1/mac")
  ip -o link | awk -v mac="$mac" '$0 ~ mac {sub(":", "", $2); print $2; exit}'
}
# env_from_profile FILE: the `export NAME=value` lines of a plugin's shell profile, as env_set
# lines (dsx launch forwards the env file, it does not source scripts). A value that refers to
# another variable cannot be copied as text, so it is left out and logged.
env_from_profile() {
  local key value lines
  lines=$(grep -E '^export [A-Z0-9_]+=' "$1") || fail "$1 exports no variable: its format changed"
  while IFS='=' read -r key value; do
    if [[ $value == *'$'* ]]; then
      log "not copied from $1: $key=$value"
    else
      env_set "$key" "$value"
    fi
  done < <(sed -e 's/^export //' -e "s/[\"']//g" <<<"$lines")
}

step identity
NODE_NAME=$(md instance/name)
log "instance $NODE_NAME ($DSX_MACHINE_TYPE), cluster $DSX_CLUSTER"

step gpus
check_gpus "$DSX_GPUS"
raise_limits

step nvme
if ! mountpoint -q "$DSX_ROOT/scratch"; then
  mount_scratch "$DSX_ROOT"/dev/disk/by-id/google-local-nvme-ssd-*
fi

step network
primary=$(nic_name 0)
[[ -n $primary ]] || fail "no interface has the MAC of network-interfaces/0"
# The GPU NICs are gVNICs in VPCs of their own (TCPX/TCPXO) or ConnectX-7 NICs of type MRDMA
# in the one RoCE VPC (RDMA); either way the metadata lists them after NIC 0.
case $DSX_GPUDIRECT in
  rdma) wanted="$DSX_GPU_NICS MRDMA NICs in the cluster's RoCE VPC" ;;
  *) wanted="$DSX_GPU_NICS extra gVNICs, each in a VPC of its own" ;;
esac
gpu_nics=()
for ((i = 1; i <= DSX_GPU_NICS; i++)); do
  name=$(nic_name "$i")
  [[ -n $name ]] || fail "GPU NIC $i is missing: the template needs $wanted"
  gpu_nics+=("$name")
done
gpu_list=$(IFS=,; echo "${gpu_nics[*]}")
log "primary NIC $primary, GPU NICs ${gpu_list:-none}"

step gpudirect
env_set NCCL_SOCKET_IFNAME "$primary"
case $DSX_GPUDIRECT in
  tcpx)
    # The plugin and its NCCL go to /var/lib/tcpx; RXDM serves the receive path over /run/tcpx.
    docker run --rm -v /var/lib:/var/lib "$DSX_PLUGIN_IMAGE" install --install-nccl
    docker rm -f receive-datapath-manager >/dev/null 2>&1 || true
    docker run --detach --pull=always --name receive-datapath-manager --privileged \
      --cap-add=NET_ADMIN --network=host --volume /var/lib/nvidia/lib64:/usr/local/nvidia/lib64 \
      --volume /run/tcpx:/run/tcpx --entrypoint /tcpgpudmarxd/build/app/tcpgpudmarxd \
      "$DSX_RXDM_IMAGE" --gpu_nic_preset a3vm --gpu_shmem_type fd --uds_path /run/tcpx \
      --setup_param "--verbose 128 2 0"
    # shared/ref/cloud.md 2.5, with this image's interface names for eth0..eth4.
    tx="${gpu_nics[0]}:8-21,112-125;${gpu_nics[1]}:8-21,112-125;${gpu_nics[2]}:60-73,164-177;${gpu_nics[3]}:60-73,164-177"
    rx="${gpu_nics[0]}:22-35,126-139;${gpu_nics[1]}:22-35,126-139;${gpu_nics[2]}:74-87,178-191;${gpu_nics[3]}:74-87,178-191"
    env_set LD_LIBRARY_PATH /var/lib/tcpx/lib64:/usr/local/nvidia/lib64
    env_set NCCL_CROSS_NIC 0
    env_set NCCL_ALGO Ring
    env_set NCCL_PROTO Simple
    env_set NCCL_NSOCKS_PERTHREAD 4
    env_set NCCL_SOCKET_NTHREADS 1
    env_set NCCL_NET_GDR_LEVEL PIX
    env_set NCCL_P2P_PXN_LEVEL 0
    env_set NCCL_GPUDIRECTTCPX_SOCKET_IFNAME "$gpu_list"
    env_set NCCL_GPUDIRECTTCPX_CTRL_DEV "$primary"
    env_set NCCL_DYNAMIC_CHUNK_SIZE 524288
    env_set NCCL_P2P_NET_CHUNKSIZE 524288
    env_set NCCL_P2P_PCI_CHUNKSIZE 524288
    env_set NCCL_P2P_NVL_CHUNKSIZE 1048576
    env_set NCCL_BUFFSIZE 4194304
    env_set NCCL_GPUDIRECTTCPX_TX_BINDINGS "$tx"
    env_set NCCL_GPUDIRECTTCPX_RX_BINDINGS "$rx"
    env_set NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS 50000
    env_set NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX /run/tcpx
    ;;
  tcpxo)
    # The plugin ships its tuned settings as nccl-env-profile.sh; copy its exports, then name
    # this node's interfaces (shared/ref/cloud.md 2.5).
    docker run --rm -v /var/lib:/var/lib "$DSX_PLUGIN_IMAGE" install --install-nccl
    docker rm -f receive-datapath-manager >/dev/null 2>&1 || true
    docker run --detach --pull=always --name receive-datapath-manager --privileged \
      --network=host --volume /var/lib/nvidia/lib64:/usr/local/nvidia/lib64 \
      --volume /dev/aperture_devices:/dev/aperture_devices --env LD_LIBRARY_PATH=/usr/local/nvidia/lib64 \
      --entrypoint /fts/entrypoint_rxdm_container.sh "$DSX_RXDM_IMAGE" \
      --num_hops=2 --num_nics=8 --uid= --alsologtostderr
    profile="$DSX_ROOT/var/lib/tcpxo/lib64/nccl-env-profile.sh"
    [[ -e $profile ]] || fail "$profile is missing: the TCPXO plugin install did not complete"
    env_from_profile "$profile"
    env_set LD_LIBRARY_PATH /var/lib/tcpxo/lib64:/usr/local/nvidia/lib64
    env_set NCCL_FASTRAK_CTRL_DEV "$primary"
    env_set NCCL_FASTRAK_IFNAME "$gpu_list"
    env_set NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY /dev/aperture_devices
    ;;
  rdma)
    # The gIB plugin drives the MRDMA NICs itself (no receive-datapath manager). Its installer
    # puts NCCL and the plugin in /usr/local/gib, with the tuned settings in set_nccl_env.sh.
    docker run --rm --volume /usr/local/gib:/var/lib/gib "$DSX_PLUGIN_IMAGE" install --install-nccl
    profile="$DSX_ROOT/usr/local/gib/scripts/set_nccl_env.sh"
    [[ -e $profile ]] || fail "$profile is missing: the gIB plugin install ($DSX_PLUGIN_IMAGE) did not complete"
    env_from_profile "$profile"
    env_set LD_LIBRARY_PATH /usr/local/gib/lib64:/usr/local/nvidia/lib64
    # NCCL's bootstrap and socket traffic stay on the host's gVNIC, whatever the profile says.
    env_set NCCL_SOCKET_IFNAME "$primary"
    ;;
  *) log "no GPUDirect path on $DSX_MACHINE_TYPE: NCCL uses sockets on $primary" ;;
esac
export_env_to_shells

step ssh
private_key=$(gcloud secrets versions access latest --quiet --project="$DSX_PROJECT" --secret="$DSX_KEY_SECRET")
setup_ssh "$DSX_OS_USER" "$DSX_CLUSTER_PUBKEY" "$private_key"

join_cluster "$(md instance/network-interfaces/0/ip)"
