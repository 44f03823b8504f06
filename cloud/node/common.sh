# shellcheck shell=bash
# Node set-up steps shared by the AWS user data and the GCP startup script. `dsx cloud ... render`
# puts the cluster settings (DSX_*) above this file and the cloud's own steps below it. Every
# path is under DSX_ROOT so that a test can run the whole script against a scratch directory.
set -Eeuo pipefail
umask 022
: "${DSX_ROOT:=}"
: "${DSX_PEER_TIMEOUT_S:=1800}"
: "${DSX_POLL_S:=15}"
: "${DSX_STORAGE_TIMEOUT_S:=900}"
DSX_ENV_FILE="$DSX_ROOT/etc/dsx/env"
DSX_HOSTFILE="$DSX_ROOT/etc/dsx/hostfile"
DSX_CANDIDATES="$DSX_ROOT/etc/dsx/hostfile.candidate"
DSX_LOG="$DSX_ROOT/var/log/dsx-node-setup.log"
DSX_STEP=start
mkdir -p "$DSX_ROOT/etc/dsx" "$DSX_ROOT/var/log" "$DSX_ROOT/var/lib/dsx"

log() { printf '%s dsx-node: %s\n' "$(date -u +%FT%TZ)" "$*" | tee -a "$DSX_LOG" >&2; }
step() { DSX_STEP=$1; log "step $1"; }

# A failed step tags the node "failed-<step>" (report_status is the cloud's own) and stops.
fail() {
  log "FAILED in step $DSX_STEP: $*"
  report_status "failed-$DSX_STEP" || true
  exit 1
}
trap 'fail "command failed at line $LINENO"' ERR

# env_set KEY VALUE: one KEY=VALUE line, the .deepspeed_env format that dsx launch forwards.
env_set() {
  touch "$DSX_ENV_FILE"
  sed -i "/^$1=/d" "$DSX_ENV_FILE"
  printf '%s=%s\n' "$1" "$2" >>"$DSX_ENV_FILE"
}

# Pinned memory for EFA/GPUDirect and many open files for data loaders.
raise_limits() {
  mkdir -p "$DSX_ROOT/etc/security/limits.d"
  printf '%s\n' '* soft memlock unlimited' '* hard memlock unlimited' \
    '* soft nofile 1048576' '* hard nofile 1048576' >"$DSX_ROOT/etc/security/limits.d/90-dsx.conf"
}

# check_gpus N: the driver sees N GPUs (waits a few minutes for a first-boot driver install).
check_gpus() {
  local found=0 tries=0
  while ((tries < 30)); do
    found=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
    ((found >= $1)) && break
    tries=$((tries + 1))
    sleep "$DSX_POLL_S"
  done
  ((found == $1)) || fail "nvidia-smi lists $found GPUs, expected $1: check the driver (dmesg, nvidia-smi)"
  if systemctl cat nvidia-fabricmanager.service >/dev/null 2>&1; then
    systemctl enable --now nvidia-fabricmanager || fail "nvidia-fabricmanager did not start: NVSwitch GPUs need it"
  fi
}

# mount_scratch DEVICE...: local NVMe drives as one RAID0 ext4 file system on /scratch.
mount_scratch() {
  local -a drives=()
  local d
  for d in "$@"; do [[ -e $d ]] && drives+=("$(readlink -f "$d")"); done
  if ((${#drives[@]} == 0)); then
    log "no local NVMe drives; /scratch not created"
    return 0
  fi
  mapfile -t drives < <(printf '%s\n' "${drives[@]}" | sort -u)
  local dev=${drives[0]}
  if ((${#drives[@]} > 1)); then
    dev=/dev/md0
    mdadm --create "$dev" --level=0 --raid-devices="${#drives[@]}" --force --run "${drives[@]}"
  fi
  mkfs.ext4 -F -q -L dsx-scratch "$dev"
  mkdir -p "$DSX_ROOT/scratch"
  mount -o noatime,nofail "$dev" "$DSX_ROOT/scratch"
  chmod 1777 "$DSX_ROOT/scratch"
  log "mounted ${#drives[@]} NVMe drive(s) on /scratch"
}

# mount_shared: the cluster's shared file system (DSX_STORAGE: fsx-lustre, efs, filestore) on
# DSX_SHARED_DIR, from the address shared_source (the cloud's own) reads from the instance's
# tags or metadata. Retries for DSX_STORAGE_TIMEOUT_S, as the file system may still be starting.
# Checkpoints and logs go there by default (DSX_CHECKPOINT_DIR, DSX_LOG_DIR in the environment).
mount_shared() {
  local src type opts dir="$DSX_ROOT$DSX_SHARED_DIR" deadline=$((SECONDS + DSX_STORAGE_TIMEOUT_S))
  src=$(shared_source) || fail "this node has no dsx-shared-source tag/metadata: was it launched by dsx cloud up with --storage?"
  case $DSX_STORAGE in
    fsx-lustre) type=lustre opts=relatime,flock,_netdev && ensure_lustre_client ;;
    efs) type=nfs4 opts=nfsvers=4.1,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,noresvport,_netdev src="$src:/" ;;
    filestore) type=nfs opts=hard,timeo=600,retrans=3,_netdev ;;
  esac
  [[ $type == lustre ]] || command -v "mount.$type" >/dev/null || apt-get install -y -qq nfs-common ||
    fail "apt-get could not install the NFS client (nfs-common)"
  mkdir -p "$dir"
  until mountpoint -q "$dir" || mount -t "$type" -o "$opts" "$src" "$dir"; do
    ((SECONDS < deadline)) || fail "$DSX_STORAGE $src did not mount on $DSX_SHARED_DIR within ${DSX_STORAGE_TIMEOUT_S}s: check that it is available and that the nodes' security group/firewall lets them reach it (Lustre TCP 988 and 1018-1023, NFS TCP 2049)"
    sleep "$DSX_POLL_S"
  done
  grep -qs " $DSX_SHARED_DIR " "$DSX_ROOT/etc/fstab" || printf '%s %s %s %s 0 0\n' "$src" "$DSX_SHARED_DIR" "$type" "$opts" >>"$DSX_ROOT/etc/fstab"
  mkdir -p "$dir/checkpoints" "$dir/logs"
  chown "$DSX_OS_USER:" "$dir/checkpoints" "$dir/logs"
  env_set DSX_SHARED_DIR "$DSX_SHARED_DIR"
  env_set DSX_CHECKPOINT_DIR "$DSX_SHARED_DIR/checkpoints"
  env_set DSX_LOG_DIR "$DSX_SHARED_DIR/logs"
  export_env_to_shells
  log "mounted $DSX_STORAGE $src on $DSX_SHARED_DIR; checkpoints go to $DSX_SHARED_DIR/checkpoints"
}

# setup_ssh USER PUBLIC_KEY PRIVATE_KEY: every node trusts the cluster key and can use it.
setup_ssh() {
  local user=$1 home="$DSX_ROOT/home/$1"
  id -u "$user" >/dev/null 2>&1 || useradd -m -s /bin/bash "$user"
  mkdir -p "$home/.ssh"
  touch "$home/.ssh/authorized_keys"
  grep -qxF "$2" "$home/.ssh/authorized_keys" || printf '%s\n' "$2" >>"$home/.ssh/authorized_keys"
  (umask 077 && printf '%s\n' "$3" >"$home/.ssh/dsx_cluster_key")
  cat >"$home/.ssh/config" <<SSH
Host 10.* 172.* 192.168.*
  IdentityFile ~/.ssh/dsx_cluster_key
  StrictHostKeyChecking accept-new
  UserKnownHostsFile ~/.ssh/known_hosts.dsx
  ConnectTimeout 10
SSH
  chmod 700 "$home/.ssh"
  chmod 600 "$home/.ssh/authorized_keys" "$home/.ssh/config"
  chown -R "$user:" "$home/.ssh"
}

# install_dsx URL: installs dsx from what --dsx-package names, by its kind:
#   <package>_<version>_<arch>.deb  (cpack -G DEB: dsx, or dsx-cuda) apt installs it with its Depends
#   .tar.gz of an installed tree    (cpack -G TGZ, bin/dsx at its root) unpacked into /opt/dsx
#   .tar.gz of dsx's sources        (git archive) built here with the image's CUDA, into /opt/dsx
install_dsx() {
  local url=$1 tmp file listing
  if [[ -z $url ]]; then
    log "no --dsx-package given: install dsx yourself (docs/cloud.md)"
    return 0
  fi
  tmp=$(mktemp -d)
  file="$tmp/${url##*/}"
  case $url in
    s3://*) aws s3 cp --only-show-errors "$url" "$file" ;;
    gs://*) gcloud storage cp "$url" "$file" ;;
    *) curl -fsSL --max-time 600 --retry 5 -o "$file" "$url" ;;
  esac
  [[ -s $file ]] || fail "downloading $url gave no file"
  case $file in
    *.deb)
      DSX_BIN="$DSX_ROOT/usr/bin/dsx"
      apt-get install -y -qq --no-install-recommends "$file" ||
        fail "apt-get could not install $url: built on this image's OS? dsx-cuda also needs NVIDIA's CUDA apt repository (docs/cloud.md)"
      ;;
    *.tar.gz | *.tgz)
      listing=$(tar -tzf "$file") || fail "$url is not a gzip tarball"
      if grep -qE '^(\./)?bin/dsx$' <<<"$listing"; then
        install_dsx_tree "$file"
      elif grep -qE '^(\./)?([^/]+/)?CMakeLists\.txt$' <<<"$listing"; then
        build_dsx_from_source "$file" "$tmp"
      else
        fail "$url holds neither an installed dsx (bin/dsx) nor dsx's sources (CMakeLists.txt)"
      fi
      ;;
    *) fail "--dsx-package $url: expected a .deb, or a .tar.gz of an installed dsx or of its sources" ;;
  esac
  rm -rf "$tmp"
  LD_LIBRARY_PATH=/opt/amazon/efa/lib "$DSX_BIN" version ||
    fail "the installed dsx does not run: build the package on this image's OS (docs/cloud.md)"
}

install_dsx_tree() {
  DSX_BIN="$DSX_ROOT/opt/dsx/bin/dsx"
  mkdir -p "$DSX_ROOT/opt/dsx" "$DSX_ROOT/usr/local/bin"
  tar -xzf "$1" -C "$DSX_ROOT/opt/dsx"
  ln -sf /opt/dsx/bin/dsx "$DSX_ROOT/usr/local/bin/dsx"
  # The shared libraries dsx links (Ubuntu 22.04 / Debian 11+ names); EFA's libfabric comes first.
  apt-get install -y -qq --no-install-recommends libboost-program-options1.74.0 libopenblas0 \
    libgomp1 libfabric1 libsentencepiece0 libutf8proc2 libpcre2-8-0 libaio1 libdnnl2 || log "WARNING: apt-get could not install dsx's runtime libraries"
}

# build_dsx_from_source TARBALL TMP: the image's own CUDA (/usr/local/cuda) when it has one.
build_dsx_from_source() {
  local src="$2/src" cmake_cuda=OFF
  DSX_BIN="$DSX_ROOT/opt/dsx/bin/dsx"
  mkdir -p "$src"
  tar -xzf "$1" -C "$src"
  [[ -e $src/CMakeLists.txt ]] || src=$(dirname "$(find "$src" -maxdepth 2 -name CMakeLists.txt | head -1)")
  [[ -x /usr/local/cuda/bin/nvcc ]] && cmake_cuda=ON && export PATH=$PATH:/usr/local/cuda/bin
  log "building dsx from source (CUDA: $cmake_cuda)"
  bash "$src/tools/setup.sh" || fail "tools/setup.sh could not install dsx's build dependencies"
  local cmake=cmake
  [[ -x $src/.cache/cmake/bin/cmake ]] && cmake=$src/.cache/cmake/bin/cmake
  "$cmake" -S "$src" -B "$src/build" -DDSX_CUDA=$cmake_cuda -DDSX_BUILD_TESTS=OFF \
    -DDSX_BUILD_BENCH=OFF >/dev/null || fail "configuring dsx from source failed"
  "$cmake" --build "$src/build" -j "$(nproc)" >/dev/null || fail "building dsx from source failed"
  "$cmake" --install "$src/build" --prefix "$DSX_ROOT/opt/dsx" >/dev/null ||
    fail "installing the dsx build failed"
  mkdir -p "$DSX_ROOT/usr/local/bin"
  ln -sf /opt/dsx/bin/dsx "$DSX_ROOT/usr/local/bin/dsx"
}

# check_dsx_report: the node is ready only if `dsx report` finds no error in the environment the
# ranks get (a driver too old for dsx's CUDA, an interface the NCCL/FI variables name that is
# missing, ...); each error is one line in the log with what to do.
check_dsx_report() {
  [[ -n ${DSX_BIN:-} ]] || { log "no dsx installed here: dsx report not run"; return 0; }
  local out
  rank_env_vars
  if ! out=$(env "${RANK_ENV[@]}" "$DSX_BIN" report --check --nodes "$DSX_NODE_COUNT" 2>&1); then
    fail "dsx report found errors on this node: $(tr '\n' ' ' <<<"$out")"
  fi
  log "$out"
}

# rank_env_vars: RANK_ENV holds the KEY=VALUE lines of the environment file, for `env`.
rank_env_vars() {
  local line
  RANK_ENV=()
  while IFS= read -r line; do
    if [[ $line == *=* ]]; then RANK_ENV+=("$line"); fi
  done <"$DSX_ENV_FILE"
}

# wait_for_peers: polls list_peer_ips (the cloud's own) until DSX_NODE_COUNT nodes are running,
# then writes the candidate hostfile, "IP slots=N" sorted by address so that rank 0 is the same
# everywhere. It becomes the hostfile once the cluster bench passed (publish_hostfile).
wait_for_peers() {
  local deadline=$((SECONDS + DSX_PEER_TIMEOUT_S)) ips home="$DSX_ROOT/home/$DSX_OS_USER"
  while true; do
    ips=$(list_peer_ips | tr -s ' \t' '\n' | grep -E '^[0-9.]+$' | sort -u -t . -k1,1n -k2,2n -k3,3n -k4,4n || true)
    [[ -n $ips && $(wc -l <<<"$ips") -ge $DSX_NODE_COUNT ]] && break
    ((SECONDS < deadline)) || fail "only $(grep -c . <<<"$ips" || true) of $DSX_NODE_COUNT nodes are running after ${DSX_PEER_TIMEOUT_S}s"
    sleep "$DSX_POLL_S"
  done
  awk -v slots="$DSX_GPUS" '{print $1 " slots=" slots}' <<<"$ips" >"$DSX_CANDIDATES"
  cp "$DSX_ENV_FILE" "$home/.deepspeed_env"
  chown "$DSX_OS_USER:" "$home/.deepspeed_env"
  log "$(wc -l <"$DSX_CANDIDATES") nodes are running"
}

# publish_hostfile: the candidates the cluster bench found ok (healthy_hostfile) become the
# hostfile of this node and of its OS user.
publish_hostfile() {
  local home="$DSX_ROOT/home/$DSX_OS_USER"
  healthy_hostfile "$DSX_HOSTFILE"
  cp "$DSX_HOSTFILE" "$home/hostfile"
  cp "$DSX_ENV_FILE" "$home/.deepspeed_env"
  chown "$DSX_OS_USER:" "$home/hostfile" "$home/.deepspeed_env"
  log "hostfile has $(wc -l <"$DSX_HOSTFILE") nodes"
}

# Login shells get the same environment as the ranks dsx launch starts.
export_env_to_shells() {
  local key value
  mkdir -p "$DSX_ROOT/etc/profile.d"
  while IFS='=' read -r key value; do
    printf 'export %s=%q\n' "$key" "$value"
  done <"$DSX_ENV_FILE" >"$DSX_ROOT/etc/profile.d/dsx.sh"
}

# What every node does once its disks and ssh are set up: shared storage, dsx, waiting for the
# other nodes, the report and health checks, then the hostfile. $1: this node's address.
join_cluster() {
  step storage
  if [[ $DSX_STORAGE != none ]]; then mount_shared; fi

  step dsx
  install_dsx "$DSX_PACKAGE"

  step peers
  wait_for_peers

  step report
  check_dsx_report

  step health
  check_cluster_health

  step ready
  publish_hostfile
  report_status yes
  log "ready: $1 is one of $DSX_NODE_COUNT nodes; hostfile in /etc/dsx/hostfile"
}
