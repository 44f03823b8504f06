#!/usr/bin/env bash
# Installs every Debian package dsx needs to build, test and run. Safe to run twice: packages
# already present are skipped, and apt is only called when something is missing.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  rapidjson-dev                 # ds_config and safetensors headers
  libboost-program-options-dev  # every command line
  libfabric-dev libfabric-bin   # the ofi communication backend (tcp, shm, efa)
  libssl-dev                    # the rendezvous store: HMAC of its shared secret (OpenSSL)
  libopenblas-dev               # CPU matmuls
  libgtest-dev libgmock-dev     # tests
  libbenchmark-dev              # micro-benchmarks
  libomp-dev                    # OpenMP (gcc uses libgomp; clang builds of the fuzzers use this)
  python3                       # helper scripts
  awscli                        # cloud tests: the EC2 API's parameter checks on rendered commands
  shellcheck                    # cloud tests: every rendered shell script is linted
  openssh-client                # dsx cloud render: ssh-keygen makes the cluster key
  openssh-server                # launcher tests: a real sshd on 127.0.0.1/127.0.0.2 for multi-node launches
  pdsh                          # launcher: the default multi-node backend (tests run it through sshd)
  openmpi-bin                   # launcher: the openmpi backend (tests run mpirun)
  slurm-wlm                     # launcher tests: a single-node slurmctld/slurmd for the slurm backend
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: run as root or install sudo" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
