#!/usr/bin/env bash
# tools/setup.sh on each system it knows, read from an os-release file as the real one would be:
# the list it would install (--print), and a clear refusal naming a system it does not know.
set -euo pipefail
setup=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

release() {  # release NAME ID VERSION_ID PRETTY_NAME
  printf 'ID=%s\nVERSION_ID="%s"\nPRETTY_NAME="%s"\n' "$2" "$3" "$4" >"$tmp/$1"
  echo "$tmp/$1"
}
list() { DSX_OS_RELEASE=$1 bash "$setup" --print; }

debian=$(list "$(release d debian 12 'Debian GNU/Linux 12 (bookworm)')")
jammy=$(list "$(release j ubuntu 22.04 'Ubuntu 22.04.4 LTS')")
noble=$(list "$(release n ubuntu 24.04 'Ubuntu 24.04.1 LTS')")
for l in "$debian" "$jammy" "$noble"; do
  for p in build-essential libfabric-dev libboost-program-options-dev libopenblas-dev libgtest-dev openmpi-bin; do
    grep -qw -- "$p" <<<"$l" || fail "$p missing from: $l"
  done
done
grep -qw awscli <<<"$debian" && grep -qw cmake <<<"$debian" || fail "Debian 12: $debian"
grep -q 'pip: cmake>=3.25' <<<"$jammy" || fail "Ubuntu 22.04 needs cmake from PyPI (its own is 3.22): $jammy"
! grep -qw awscli <<<"$noble" || fail "Ubuntu 24.04 has no awscli package: $noble"

if out=$(list "$(release f fedora 40 'Fedora Linux 40')" 2>&1); then fail "Fedora accepted: $out"; fi
grep -q "Fedora Linux 40 is not a system this script knows" <<<"$out" || fail "refusal says: $out"
grep -q "DSX_SETUP_OS=debian12" <<<"$out" || fail "refusal names no way on: $out"
[[ $(DSX_SETUP_OS=ubuntu24.04 bash "$setup" --print) == "$noble" ]] || fail "DSX_SETUP_OS=ubuntu24.04 differs"
echo "PASS: Debian 12, Ubuntu 22.04 and 24.04 lists; Fedora refused with the way on"
