#!/bin/bash
# Developer check, outside CI (the Google Cloud CLI is not a Debian package): runs every gcloud
# call that `dsx cloud gcp up` and `down` print, for each machine type, with credentials disabled
# and every API endpoint pointed at a closed 127.0.0.1 port. gcloud parses all flags before it
# connects, so a valid call ends in a connection error (exit 1, naming the closed port) or the
# per-call time limit, and an unknown or malformed flag in a usage error (exit 2, or exit 1 with
# an "Invalid value" message).
# Usage: tests/cloud/check_gcloud_commands.sh path/to/dsx [machine-type[" extra flags"]...]
# e.g. ... build/dsx a3-megagpu-8g "a3-ultragpu-8g --spot"; a type given alone gets the flags
# default_flags names for it.
set -euo pipefail
dsx=${1:?usage: $0 path/to/dsx [machine-type[" extra flags"]...]}
shift
types=("$@")
((${#types[@]})) || types=(a2-highgpu-8g a2-ultragpu-8g a3-highgpu-8g a3-megagpu-8g a3-ultragpu-8g
  "a3-ultragpu-8g --spot" "a3-highgpu-8g --reservation r1" "a2-highgpu-8g --storage filestore")
command -v gcloud >/dev/null || { echo "gcloud is not installed" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export CLOUDSDK_CONFIG="$work/gcloud" CLOUDSDK_AUTH_DISABLE_CREDENTIALS=true
export CLOUDSDK_CORE_CHECK_GCE_METADATA=false CLOUDSDK_CORE_DISABLE_USAGE_REPORTING=1
export CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK=1
for api in COMPUTE SECRETMANAGER CLOUDRESOURCEMANAGER SERVICEUSAGE FILE; do
  export "CLOUDSDK_API_ENDPOINT_OVERRIDES_$api=http://127.0.0.1:9/"
done
# Values the printed scripts capture from earlier calls.
export PROJECT_NUMBER=123456789012 NAMES="dsx-check-0001 dsx-check-0002" FILESTORE_IP=10.20.0.2

# The flags without which up refuses a type: A3 Ultra has no on-demand capacity.
default_flags() {
  case $1 in
    a3-ultragpu-8g) echo --reservation r1 ;;
  esac
}

# reached_port EXIT OUTPUT: the call got as far as the closed port (or the time limit). gcloud
# exits 1 on some invalid values too (nic-type=BOGUS), so exit 1 alone proves nothing.
reached_port() {
  (($1 == 124)) || { (($1 == 1)) && grep -qE "127\.0\.0\.1', port=9|Connection refused" <<<"$2"; }
}

failures=0
for spec in "${types[@]}"; do
  read -r type extra <<<"$spec"
  [[ -n $extra ]] || extra=$(default_flags "$type")
  read -ra extra_flags <<<"$extra"
  flags=(--cluster check --project proj-1 --zone us-central1-a --machine-type "$type")
  "$dsx" cloud gcp up --dry-run "${flags[@]}" "${extra_flags[@]}" --ssh-cidr 35.235.240.0/20 \
    --out "$work/$type" >"$work/up.sh"
  "$dsx" cloud gcp down --dry-run "${flags[@]}" "${extra_flags[@]}" >"$work/down.sh"
  # shellcheck disable=SC2016  # the sed patterns match a literal $(
  while read -r line; do
    set +e
    output=$(eval "timeout 30 $line" 2>&1)
    code=$?
    set -e
    if reached_port "$code" "$output"; then
      echo "ok    $spec: ${line:0:100}"
    else
      echo "FAIL  $spec (exit $code): $line"$'\n'"$output"
      failures=$((failures + 1))
    fi
  done < <(grep -h 'gcloud ' "$work/up.sh" "$work/down.sh" | grep -v '^ *echo ' |
    sed -e 's/^ *//' -e 's/ || true$//' -e 's| >/dev/null$||' -e 's/^if ! //' \
      -e 's/) || \[\[.*; then$/)/' -e 's/^[A-Z_]*=\$(//' -e 's/)$//')
done
echo "$failures call(s) failed"
((failures == 0))
