#!/usr/bin/env bash
# The .deb a user installs: cpack makes it from this build, dpkg installs it, and dsx runs from
# the installed files alone (version, config check, a short two-rank training run started by
# dsx launch from a directory outside the tree, with only /usr/bin on PATH); dpkg then removes
# every file it installed. Needs root (dpkg -i); skipped (77) otherwise, or when a dsx or dsx-cuda
# package is already installed on this machine, which the test would replace. (check_deb.sh
# checks the package's fields and files without installing it.)
# Usage: test_deb_package.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)

fail() { echo "FAIL: $*" >&2; exit 1; }
if [[ $(id -u) -ne 0 ]]; then echo "SKIP: dpkg -i needs root"; exit 77; fi
for p in dsx dsx-cuda; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    echo "SKIP: the $p package is installed here already; not replacing it"; exit 77
  fi
done

tmp=$(mktemp -d)
installed=0
cleanup() {
  ((installed)) && dpkg -r "$name" >/dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT

cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1 ||
  { cat "$tmp/cpack.log"; fail "cpack -G DEB failed"; }
deb=$(find "$tmp/pkg" -maxdepth 1 -name 'dsx*.deb' | head -1)
[[ -n $deb ]] || fail "cpack wrote no dsx*.deb: $(ls "$tmp/pkg")"
name=$(dpkg-deb -f "$deb" Package)  # dsx, or dsx-cuda for a CUDA build
echo "package: $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB)"

# Runtime dependencies by package name, read off the binary's libraries.
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
for lib in libboost-program-options libfabric libssl libstdc++6 libc6; do
  grep -q "$lib" <<<"$depends" || fail "Depends lacks $lib: $depends"
done
contents=$(dpkg-deb -c "$deb")
for f in ./usr/bin/dsx ./usr/share/dsx/configs/quickstart.json ./usr/share/dsx/cloud/node/common.sh \
  ./usr/share/dsx/cloud/gcp/startup.sh "./usr/share/doc/$name/README.md" "./usr/share/doc/$name/cloud.md"; do
  grep -q " $f\$" <<<"$contents" || fail "the package lacks $f"
done

dpkg -i "$deb" >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -i failed"; }
installed=1
! ldd /usr/bin/dsx | grep -q "not found" || fail "installed dsx misses libraries: $(ldd /usr/bin/dsx)"
! ldd /usr/bin/dsx | grep -qF "$build" || fail "installed dsx loads libraries from the build tree"

mkdir -p "$tmp/run"
cd "$tmp/run"
run() { env -i PATH=/usr/bin:/bin HOME="$tmp/run" OMP_NUM_THREADS=1 timeout 300 "$@"; }
out=$(run dsx version) || fail "dsx version: $out"
grep -q '^dsx [0-9]' <<<"$out" || fail "dsx version printed: $out"
out=$(run dsx config check /usr/share/dsx/configs/quickstart.json 2>&1) || fail "dsx config check: $out"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
out=$(run dsx launch --num_gpus 2 --master_port "$port" dsx train \
  --deepspeed_config /usr/share/dsx/configs/quickstart.json --steps 6 --eval_interval 0 \
  --samples 0 --progress plain --save "$tmp/run/ck" 2>&1) || { echo "$out"; fail "dsx launch ... dsx train"; }
grep -q "2 rank(s) over" <<<"$out" || { echo "$out"; fail "the job did not train on 2 ranks"; }
[[ -f $tmp/run/ck/latest ]] || { echo "$out"; fail "the training run saved no checkpoint"; }
echo "installed dsx trained: $(grep -c . <<<"$out") lines of output, checkpoint $(cat "$tmp/run/ck/latest")"
cd /

dpkg -r "$name" >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -r failed"; }
installed=0
for f in /usr/bin/dsx /usr/share/dsx "/usr/share/doc/$name" /usr/share/man/man1/dsx.1.gz; do
  [[ ! -e $f ]] || fail "$f is left after dpkg -r"
done
! dpkg-query -W -f='${Status}' "$name" 2>/dev/null | grep -q "install ok installed" || fail "$name still installed"
echo "PASS: installed, trained from the installed files, removed cleanly"
