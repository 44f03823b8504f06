# Sourced by the scripts that lay out files from PyPI wheels in a private folder (cuda12_prefix.sh,
# cuda_headers.sh, cudnn_frontend.sh), which define say and die first: the check that pip can download, and the
# staging folder that takes the folder's place only once everything in it is in place.

require_pip() {
  command -v python3 >/dev/null || die "python3 is needed (pip downloads the wheels)"
  python3 -m pip --version >/dev/null 2>&1 ||
    die "python3 has no pip (Debian: apt-get install python3-pip)"
}

# start_stage DEST: a fresh, empty DEST.partial with wheels/ and unpacked/ in it, named by $stage
# and removed when the script exits (what it moves out of it first is kept).
start_stage() {
  stage=$1.partial
  rm -rf "$stage"
  mkdir -p "$stage/wheels" "$stage/unpacked"
  trap 'rm -rf "$stage"' EXIT
}

# unpack_wheels WHEEL...: downloads the pinned wheels (no dependencies, binaries only) and unpacks
# each into $stage/unpacked, keeping none of the archives.
unpack_wheels() {
  say "downloading $*"
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --dest "$stage/wheels" "$@"
  local whl
  for whl in "$stage"/wheels/*.whl; do
    python3 -m zipfile -e "$whl" "$stage/unpacked"
    rm -f "$whl"
  done
}
