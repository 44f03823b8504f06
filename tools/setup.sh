#!/usr/bin/env bash
# Installs every system package dsx needs to build, test and run, on the distributions it knows:
# Debian 12, Ubuntu 22.04 and Ubuntu 24.04 (the names are the same but where noted). Safe to run
# twice: packages already present are skipped, and apt is only called when something is missing.
#   bash tools/setup.sh           install what is missing
#   bash tools/setup.sh --print   print this system's package list and exit (nothing installed)
# DSX_SETUP_OS=debian12|ubuntu22.04|ubuntu24.04 takes that list on a system this script does not
# know (a derivative, a newer release); DSX_OS_RELEASE names another os-release file (tests).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake pkg-config git
  rapidjson-dev                 # ds_config and safetensors headers
  libboost-program-options-dev  # every command line
  libboost-context-dev          # tests: the emulated GPU runs each GPU thread as a fiber
  libfabric-dev libfabric-bin   # the ofi communication backend (tcp, shm, efa)
  libssl-dev                    # the rendezvous store: HMAC of its shared secret (OpenSSL)
  zlib1g-dev                    # dsx cloud: AWS user data over 16 KB goes gzipped
  libopenblas-dev               # CPU matmuls
  libdnnl-dev                   # CPU bf16 matmuls (oneDNN; AVX512_BF16 / AMX kernels)
  patchelf                      # tools/gpu_bundle.sh: bundled binaries find their libraries ($ORIGIN)
  xz-utils                      # tools/gpu_bundle.sh: the bundle a lent GPU machine carries is .tar.xz
  libpcre2-dev                  # tokenizers: the pre-tokenizer regexes (Unicode classes, JIT)
  libutf8proc-dev               # tokenizers: NFC normalization and Unicode categories
  libsentencepiece-dev          # tokenizers: SentencePiece tokenizer.model files (Llama 2, Mistral)
  libaio-dev                    # NVMe offload: direct asynchronous I/O to the swap files
  fio                           # bench: the disk's O_DIRECT bandwidth beside dsx's swap
  libgtest-dev libgmock-dev     # tests
  libbenchmark-dev              # micro-benchmarks
  libomp-dev                    # OpenMP (gcc uses libgomp; clang builds of the fuzzers use this)
  python3                       # helper scripts
  python3-pip                   # CUDA builds: tools/cudnn_frontend.sh fetches headers with pip
  awscli                        # cloud tests: the EC2 API's parameter checks on rendered commands
  shellcheck                    # cloud tests: every rendered shell script is linted
  openssh-client                # dsx cloud render: ssh-keygen makes the cluster key
  openssh-server                # launcher tests: a real sshd on 127.0.0.1/127.0.0.2 for multi-node launches
  pdsh                          # launcher: the default multi-node backend (tests run it through sshd)
  openmpi-bin                   # launcher: the openmpi backend (tests run mpirun)
  slurm-wlm                     # launcher tests: a single-node slurmctld/slurmd for the slurm backend
)

# The system: ID and VERSION_ID of os-release, or the list DSX_SETUP_OS names.
system=${DSX_SETUP_OS:-}
if [[ -z $system ]]; then
  release=${DSX_OS_RELEASE:-/etc/os-release}
  [[ -r $release ]] || { echo "setup: $release is missing: cannot tell which system this is" >&2; exit 2; }
  # shellcheck disable=SC1090
  system=$(. "$release" && echo "${ID:-unknown}${VERSION_ID:-}")
  pretty=$(. "$release" && echo "${PRETTY_NAME:-$system}")
else
  pretty="DSX_SETUP_OS=$system"
fi

pip_cmake=0  # Ubuntu 22.04's cmake (3.22) is older than the 3.25 dsx needs: cmake from PyPI
case $system in
  debian12) ;;
  ubuntu22.04)
    packages=("${packages[@]/#cmake/python3-venv}")
    pip_cmake=1
    ;;
  ubuntu24.04)
    # Ubuntu 24.04 has no awscli package (it is a snap there).
    packages=("${packages[@]/#awscli/}")
    ;;
  *)
    {
      echo "setup: $pretty is not a system this script knows."
      echo "setup: it knows Debian 12, Ubuntu 22.04 and Ubuntu 24.04. On another Debian or Ubuntu"
      echo "setup: release run it with DSX_SETUP_OS=debian12 (or ubuntu22.04, ubuntu24.04) to use"
      echo "setup: that list; elsewhere install the equivalents of:"
      echo "setup:   ${packages[*]}"
    } >&2
    exit 2
    ;;
esac
read -r -a packages <<<"${packages[*]}"  # drop the emptied entries

if [[ ${1:-} == --print ]]; then
  echo "${packages[*]}"
  ((pip_cmake)) && echo "pip: cmake>=3.25,<4 into .cache/cmake"
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]} > 0)); then
  echo "setup: installing on $pretty: ${missing[*]}"
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "setup: run as root or install sudo" >&2; exit 1; }
    sudo_cmd=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all ${#packages[@]} packages present ($pretty)"
fi

if ((pip_cmake)) && [[ ! -x .cache/cmake/bin/cmake ]]; then
  echo "setup: cmake from PyPI into .cache/cmake (the system's is older than 3.25)"
  python3 -m venv .cache/cmake
  .cache/cmake/bin/pip install -q 'cmake>=3.25,<4'
fi
[[ ${#missing[@]} -eq 0 ]] || echo "setup: done"
