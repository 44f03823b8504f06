# shellcheck shell=bash
# The cluster bench before the hostfile (docs/cloud.md 1.3). Nodes start at different times, so
# each one tags itself dsx-ready=checked once its own checks passed; the node with the lowest
# address waits for all of them, runs `dsx bench comm` over all nodes and then over pairs of
# neighbours (in rounds of disjoint pairs) with dsx launch over ssh as DSX_OS_USER, and tags
# every node with its figures and verdict: dsx-busbw (its better pair, GB/s), dsx-busbw-all
# (all nodes) and dsx-health (ok, slow, failed). Every node then waits for its own verdict. The
# cloud's part gives my_ip, list_peer_states (lines "IP<tab>ID<tab>READY<tab>HEALTH") and
# tag_health ID BUSBW ALL HEALTH. The hostfile then holds only the nodes found ok.
: "${DSX_HEALTH_TIMEOUT_S:=3600}"
: "${DSX_BENCH_TIMEOUT_S:=900}"
: "${DSX_HEALTH_MIN_FRACTION:=0.8}"
DSX_BENCH_DIR="$DSX_ROOT/var/lib/dsx/bench"

check_cluster_health() {
  if [[ -z ${DSX_BIN:-} ]]; then
    log "no dsx installed here: the cluster bench is not run"
    return 0
  fi
  report_status checked
  local me first
  me=$(my_ip)
  first=$(awk 'NR == 1 {print $1}' "$DSX_CANDIDATES")
  if [[ $me == "$first" ]]; then run_cluster_bench; fi
  await_verdict "$me" "$first"
}

# peer_field IP N STATES: field N of node IP's line.
peer_field() { awk -F'\t' -v ip="$1" -v n="$2" '$1 == ip {print $n}' <<<"$3"; }

# Waits until every node passed its own checks; a node that failed them stops the bench.
wait_until_all_checked() {
  local deadline=$((SECONDS + DSX_HEALTH_TIMEOUT_S)) bad
  while true; do
    DSX_STATES=$(list_peer_states)
    bad=$(awk -F'\t' '$3 ~ /^failed-/ {print $1 " (dsx-ready=" $3 ")"; exit}' <<<"$DSX_STATES")
    [[ -z $bad ]] || condemn_all "node $bad failed its own checks; the cluster bench needs every node: replace it (its log is /var/log/dsx-node-setup.log)"
    (($(awk -F'\t' '$3 == "checked" || $3 == "yes"' <<<"$DSX_STATES" | wc -l) >= DSX_NODE_COUNT)) && return 0
    ((SECONDS < deadline)) || condemn_all "not every node passed its checks within ${DSX_HEALTH_TIMEOUT_S}s"
    sleep "$DSX_POLL_S"
  done
}

# condemn_all MESSAGE: every node's verdict is failed (so that none waits in vain), then fail.
condemn_all() {
  local id
  while read -r id; do tag_health "$id" - - failed || true; done < <(awk -F'\t' '{print $2}' <<<"$DSX_STATES")
  fail "$1"
}

# bench_busbw NAME [HOST@HOST]: the busbw (GB/s) of the largest size, "" when the bench failed;
# the whole output goes to DSX_BENCH_DIR/NAME.txt.
bench_busbw() {
  local include=() flags out rc=0
  [[ -z ${2:-} ]] || include=(--include "$2")
  read -ra flags <<<"$DSX_HEALTH_BENCH"
  out=$(timeout "$DSX_BENCH_TIMEOUT_S" runuser -u "$DSX_OS_USER" -- env HOME="/home/$DSX_OS_USER" \
    "${RANK_ENV[@]}" "$DSX_BIN" launch --hostfile "$DSX_CANDIDATES" "${include[@]}" --no_python \
    --no_local_rank "$DSX_BIN" bench comm "${flags[@]}" 2>&1) || rc=$?
  printf '%s\n' "$out" >"$DSX_BENCH_DIR/$1.txt"
  ((rc == 0)) || { log "bench $1 failed (exit $rc): $(tail -n 3 <<<"$out" | tr '\n' ' ')"; return 0; }
  awk 'NF >= 8 && $(NF - 7) ~ /^[0-9]+$/ && $(NF - 6) ~ /^[0-9]+$/ {v = $(NF - 1)} END {if (v != "") printf "%.1f\n", v}' <<<"$out"
}

# Pair I is node I with node I+1 (the last with the first). Rounds of disjoint pairs run at once:
# even I, odd I, then the closing pair when the count is odd.
run_pairs() {
  local n=${#DSX_HOSTS[@]} i round
  for round in even odd last; do
    for ((i = 0; i < n; i++)); do
      case $round in
        even) ((i % 2 == 0 && !(n % 2 == 1 && i == n - 1))) || continue ;;
        odd) ((i % 2 == 1)) || continue ;;
        last) ((n % 2 == 1 && i == n - 1)) || continue ;;
      esac
      bench_busbw "pair-$i" "${DSX_HOSTS[i]}@${DSX_HOSTS[(i + 1) % n]}" >"$DSX_BENCH_DIR/pair-$i.busbw" &
    done
    wait
  done
}

# node_best I: the better of node I's two pairs.
node_best() {
  local n=${#DSX_HOSTS[@]}
  awk -v a="$(cat "$DSX_BENCH_DIR/pair-$((($1 + n - 1) % n)).busbw")" \
    -v b="$(cat "$DSX_BENCH_DIR/pair-$1.busbw")" 'BEGIN {a += 0; b += 0; printf "%.1f\n", (a > b ? a : b)}'
}

run_cluster_bench() {
  local all n i median best health
  wait_until_all_checked
  mapfile -t DSX_HOSTS < <(awk '{print $1}' "$DSX_CANDIDATES")
  n=${#DSX_HOSTS[@]}
  mkdir -p "$DSX_BENCH_DIR"
  rank_env_vars
  all=$(bench_busbw all)
  [[ -n $all ]] || condemn_all "the bench over all $n nodes failed: see $DSX_BENCH_DIR/all.txt"
  log "all $n nodes: busbw $all GB/s"
  local -a bests=()
  if ((n >= 3)); then
    run_pairs
    for ((i = 0; i < n; i++)); do bests+=("$(node_best "$i")"); done
  else
    log "with $n node(s) no pair can be told apart: each node gets the all-nodes figure"
    for ((i = 0; i < n; i++)); do bests+=("$all"); done
  fi
  median=$(printf '%s\n' "${bests[@]}" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
  : >"$DSX_BENCH_DIR/summary"
  for ((i = 0; i < n; i++)); do
    best=${bests[i]}
    health=$(awk -v b="$best" -v m="$median" -v f="$DSX_HEALTH_MIN_FRACTION" 'BEGIN {print (b < f * m ? "slow" : "ok")}')
    printf '%s %s %s\n' "${DSX_HOSTS[i]}" "$best" "$health" >>"$DSX_BENCH_DIR/summary"
    log "node ${DSX_HOSTS[i]}: busbw $best GB/s with its neighbours (median $median): $health"
    tag_health "$(peer_field "${DSX_HOSTS[i]}" 2 "$DSX_STATES")" "$best" "$all" "$health"
  done
}

# host_verdicts: "IP VERDICT" lines, from the bench's summary on the node that ran it, else from
# the nodes' dsx-health tags/labels.
host_verdicts() {
  if [[ -s $DSX_BENCH_DIR/summary ]]; then
    awk '{print $1, $3}' "$DSX_BENCH_DIR/summary"
  else
    list_peer_states | awk -F'\t' '{print $1, $4}'
  fi
}

# healthy_hostfile OUT: the candidate hostfile less the nodes the cluster bench did not find ok
# (slow, failed, or no longer running), which are named in the log: a job must not start ranks on
# them. The bench node tags the nodes one after another, so this waits until every running
# candidate has its verdict. Without dsx there was no bench: every candidate.
healthy_hostfile() {
  local verdicts unknown left_out deadline=$((SECONDS + DSX_HEALTH_TIMEOUT_S))
  if [[ -z ${DSX_BIN:-} ]]; then
    cp "$DSX_CANDIDATES" "$1"
    return 0
  fi
  while true; do
    verdicts=$(host_verdicts)
    unknown=$(awk 'NR == FNR {v[$1] = $2; next} ($1 in v) && (v[$1] == "" || v[$1] == "None") {printf "%s ", $1}' \
      <(printf '%s\n' "$verdicts") "$DSX_CANDIDATES")
    [[ -n $unknown ]] || break
    ((SECONDS < deadline)) || fail "no verdict from the cluster bench for ${unknown}within ${DSX_HEALTH_TIMEOUT_S}s"
    sleep "$DSX_POLL_S"
  done
  awk 'NR == FNR {v[$1] = $2; next} v[$1] == "ok"' <(printf '%s\n' "$verdicts") "$DSX_CANDIDATES" >"$1"
  left_out=$(awk 'NR == FNR {v[$1] = $2; next} {s = ($1 in v) ? v[$1] : "not running"} s != "ok" {printf "%s%s (%s)", sep, $1, s; sep = ", "}' \
    <(printf '%s\n' "$verdicts") "$DSX_CANDIDATES")
  [[ -z $left_out ]] || log "left out of the hostfile, as the cluster bench did not find them ok: $left_out"
}

# await_verdict ME FIRST: this node's dsx-health (the bench node reads its own summary).
await_verdict() {
  local deadline=$((SECONDS + DSX_HEALTH_TIMEOUT_S)) health=""
  while true; do
    if [[ -s $DSX_BENCH_DIR/summary ]]; then
      health=$(awk -v ip="$1" '$1 == ip {print $3}' "$DSX_BENCH_DIR/summary")
    else
      health=$(peer_field "$1" 4 "$(list_peer_states)")
    fi
    [[ -n $health && $health != None ]] && break
    ((SECONDS < deadline)) || fail "no verdict from the cluster bench on $2 within ${DSX_HEALTH_TIMEOUT_S}s: see /var/log/dsx-node-setup.log there"
    sleep "$DSX_POLL_S"
  done
  case $health in
    ok) log "the cluster bench passed" ;;
    slow) fail "the cluster bench found this node slow: its pairs reach less than $DSX_HEALTH_MIN_FRACTION of the cluster's median busbw (tags dsx-busbw, dsx-busbw-all): replace it (docs/cloud.md 1.5)" ;;
    *) fail "the cluster bench on $2 failed: see /var/log/dsx-node-setup.log there" ;;
  esac
}
