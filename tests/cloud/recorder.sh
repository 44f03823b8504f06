#!/bin/bash
# Stands in for a cloud command in test_cloud_node_scripts: appends its name and arguments to
# $DSX_TEST_LOG (one line, shell-quoted) and prints what the real command would for the test's
# cluster. Installed under each command's name in a directory put first on PATH.
name=$(basename "$0")
{
  printf '%s' "$name"
  printf ' %q' "$@"
  printf '\n'
} >>"$DSX_TEST_LOG"
args="$*"
# The peers' states for the cluster bench (IP, id, dsx-ready, dsx-health; tab-separated): the
# test's own, or every peer checked and without a verdict.
states() {
  if [[ -n $DSX_TEST_STATES ]]; then
    printf '%b\n' "$DSX_TEST_STATES"
  else
    printf '%b\n' "$DSX_TEST_PEERS" | tr -s ' \t' '\n' | grep . | while read -r ip; do
      printf '%s\t%s\tchecked\t%s\n' "$ip" "id-$ip" "$1"
    done
  fi
}
case $name in
  fi_info)
    for ((i = 0; i < ${DSX_TEST_EFA:-0}; i++)); do
      printf 'provider: efa\n    fabric: efa\n    domain: rdmap%ss0-rdm\n    version: 120.0\n    type: FI_EP_RDM\n    protocol: FI_PROTO_EFA\n' "$i"
    done
    ;;
  nvidia-smi)
    for ((i = 0; i < ${DSX_TEST_GPUS:-8}; i++)); do echo "GPU $i: NVIDIA H100 80GB HBM3 (UUID: GPU-$i)"; done
    ;;
  curl)
    case $args in
      *api/token*) echo TOKEN123 ;;
      *meta-data/instance-id*) echo i-0abc1234 ;;
      *meta-data/local-ipv4*) echo 10.0.1.7 ;;
      *instance/name*) echo dsx-ci-0001 ;;
      *network-interfaces/0/ip*) echo 10.128.0.5 ;;
      *tags/instance/dsx-shared-source* | *attributes/dsx-shared-source*)
        [[ -n $DSX_TEST_SHARED_SOURCE ]] || exit 22
        echo "$DSX_TEST_SHARED_SOURCE"
        ;;
      *network-interfaces/*/mac*) n=${args#*network-interfaces/}; echo "42:01:0a:00:00:0${n%%/*}" ;;
      *) echo "recorder: unexpected curl $args" >&2; exit 22 ;;
    esac
    ;;
  aws)
    case $args in
      *"ec2 describe-instances"*dsx-health*) states None ;;
      *"ec2 describe-instances"*) printf '%b\n' "$DSX_TEST_PEERS" ;;
      *"ssm get-parameter"*) printf '%s\n' '-----BEGIN OPENSSH PRIVATE KEY-----' 'cluster-private-key' '-----END OPENSSH PRIVATE KEY-----' ;;
      *"s3 cp"*) cp "$DSX_TEST_PACKAGE" "${!#}" ;;
    esac
    ;;
  gcloud)
    case $args in
      *"compute instances list"*dsx-health*) states "" ;;
      *"storage cp"*) cp "$DSX_TEST_PACKAGE" "${!#}" ;;
      *"compute instances list"*) printf '%b\n' "$DSX_TEST_PEERS" ;;
      *"secrets versions access"*) printf '%s\n' '-----BEGIN OPENSSH PRIVATE KEY-----' 'cluster-private-key' '-----END OPENSSH PRIVATE KEY-----' ;;
    esac
    ;;
  runuser)
    # Runs the command as given (the test runs as one user): what follows `--`.
    while (($#)) && [[ $1 != -- ]]; do shift; done
    shift
    exec "$@"
    ;;
  mount)
    # A shared file system that never answers (DSX_TEST_MOUNT_FAIL): mount.nfs/lustre exit 32.
    [[ -n $DSX_TEST_MOUNT_FAIL && $args == "-t "[ln]* ]] && exit 32
    ;;
  apt-get)
    # A .deb is "installed" by unpacking it under the scratch root.
    for a in "$@"; do [[ $a == *.deb ]] && dpkg-deb -x "$a" "$DSX_ROOT"; done
    ;;
  ip)
    echo "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT group default qlen 1000\\    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00"
    for ((n = 0; n < ${DSX_TEST_NICS:-9}; n++)); do
      echo "$((n + 2)): ens$((n + 4)): <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 8244 qdisc mq state UP mode DEFAULT group default qlen 1000\\    link/ether 42:01:0a:00:00:0$n brd ff:ff:ff:ff:ff:ff"
    done
    ;;
esac
exit 0
