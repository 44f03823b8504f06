#!/usr/bin/env bash
# What Debian asks of a package, checked on the .deb itself with dpkg-deb (no root, no install):
# the name (dsx for a CPU build, dsx-cuda for a CUDA build, each conflicting with and replacing
# the other), a Debian revision, Section and Priority, an extended description, the CUDA
# libraries in dsx-cuda's Depends (the CUDA build installed on a host without them cannot start)
# and none in dsx's, the copyright file (machine-readable), changelog.Debian.gz for this version,
# the manual page, a stripped binary, and root-owned files with 0644/0755 modes. Then lintian,
# where it is installed (it is not a build dependency): no error and no warning.
# Usage: check_deb.sh DEB cpu|cuda
set -euo pipefail
deb=$1 kind=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
[[ -f $deb ]] || fail "no package $deb"
case $kind in
  cpu) name=dsx other=dsx-cuda ;;
  cuda) name=dsx-cuda other=dsx ;;
  *) fail "kind must be cpu or cuda, not $kind" ;;
esac
field() { dpkg-deb -f "$deb" "$1"; }

[[ $(field Package) == "$name" ]] || fail "Package is '$(field Package)', not $name"
[[ $(field Version) =~ ^[0-9]+\.[0-9]+\.[0-9]+-[0-9]+$ ]] || fail "Version '$(field Version)' has no Debian revision"
[[ $(field Section) == science ]] || fail "Section is '$(field Section)'"
[[ $(field Priority) == optional ]] || fail "Priority is '$(field Priority)'"
[[ $(field Conflicts) == "$other" && $(field Replaces) == "$other" ]] ||
  fail "Conflicts '$(field Conflicts)' and Replaces '$(field Replaces)' must name $other"
(($(field Description | wc -l) > 1)) || fail "the Description has no extended description"

depends=$(field Depends)
echo "Depends: $depends"
grep -q 'libc6' <<<"$depends" || fail "Depends lacks libc6 (dpkg-shlibdeps did not run?)"
cuda_packages=(cuda-cudart- libcublas- libcudnn libnccl2)
for p in "${cuda_packages[@]}"; do
  if [[ $kind == cuda ]]; then
    grep -qE "(^|, )$p" <<<"$depends" || fail "dsx-cuda's Depends lacks $p*: $depends"
  else
    ! grep -qE "(^|, )$p" <<<"$depends" || fail "dsx (CPU) Depends on $p*: $depends"
  fi
done

doc=./usr/share/doc/$name
listing=$(dpkg-deb -c "$deb")
for f in ./usr/bin/dsx "$doc/copyright" "$doc/changelog.Debian.gz" "$doc/README.md" \
  ./usr/share/man/man1/dsx.1.gz ./usr/share/dsx/configs/quickstart.json; do
  grep -q " $f\$" <<<"$listing" || fail "the package lacks $f"
done
bad_modes=$(awk '$2 != "root/root" || ($1 !~ /^d/ && $1 != "-rwxr-xr-x" && $1 != "-rw-r--r--") ||
  ($1 ~ /^d/ && $1 != "drwxr-xr-x")' <<<"$listing")
[[ -z $bad_modes ]] || fail "files not root-owned 0644/0755 (or dirs 0755): $bad_modes"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dpkg-deb -x "$deb" "$tmp"
head -1 "$tmp/$doc/copyright" | grep -qx 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' ||
  fail "$doc/copyright is not machine-readable (no Format: line)"
first=$(gzip -dc "$tmp/$doc/changelog.Debian.gz" | head -1)
[[ $first == "dsx ($(field Version)) "* ]] || fail "changelog.Debian.gz begins '$first', not with this version"
! readelf -S "$tmp/usr/bin/dsx" | grep -qE '\.(symtab|debug_info)' || fail "usr/bin/dsx is not stripped"

if command -v lintian >/dev/null; then
  lintian --fail-on error,warning "$deb" || fail "lintian reports errors or warnings (above)"
  echo "lintian: no error, no warning"
else
  echo "lintian is not installed: its check skipped"
fi
echo "PASS: $(basename "$deb") ($name) holds what Debian asks"
