#!/bin/sh
# A rank for the launcher tests: records its environment, arguments and pid in $DSX_TEST_OUT, then
# behaves as $DSX_TEST_MODE says. Signals it receives are recorded as rank<N>.<signal> files.
out=${DSX_TEST_OUT:?DSX_TEST_OUT must be set}

# Sleeps in the background so that traps run at once; a trap stops the sleep too, so that a rank
# signalled alone (not through its process group) leaves nothing behind. The traps are set before
# the pid file appears, so a test that signals a rank once its pid file exists never beats them.
nap() { sleep "$1" & napping=$!; wait $napping; }
stop_nap() { [ -n "$napping" ] && kill "$napping" 2>/dev/null; }
trap 'stop_nap; touch "$out/rank$RANK.term"; exit 143' TERM
trap 'stop_nap; touch "$out/rank$RANK.int"; exit 130' INT

env > "$out/rank$RANK.env.tmp" && mv "$out/rank$RANK.env.tmp" "$out/rank$RANK.env"
printf '%s\n' "$@" > "$out/rank$RANK.args"
grep Cpus_allowed_list /proc/self/status > "$out/rank$RANK.cpus"
echo $$ > "$out/rank$RANK.pid.tmp" && mv "$out/rank$RANK.pid.tmp" "$out/rank$RANK.pid"
echo "rank $RANK says hello"
echo "rank $RANK to stderr" >&2

case "${DSX_TEST_MODE:-ok}" in
  ok) exit 0 ;;
  exit) exit "${DSX_TEST_CODE:-0}" ;;
  fail)  # rank $DSX_TEST_RANK fails with $DSX_TEST_CODE once every rank has started; others wait
    if [ "$RANK" = "$DSX_TEST_RANK" ]; then
      i=0
      while [ "$(ls "$out"/rank*.pid | wc -l)" -lt "$WORLD_SIZE" ] && [ $i -lt 100 ]; do nap 0.1; i=$((i+1)); done
      exit "$DSX_TEST_CODE"
    fi
    nap 60; exit 0 ;;
  fail_restarts)  # rank $DSX_TEST_RANK fails while TORCHELASTIC_RESTART_COUNT < $DSX_TEST_UNTIL
    touch "$out/rank$RANK.started$TORCHELASTIC_RESTART_COUNT"
    [ "$TORCHELASTIC_RESTART_COUNT" -ge "$DSX_TEST_UNTIL" ] && exit 0
    if [ "$RANK" = "$DSX_TEST_RANK" ]; then  # once every rank of this start is up
      i=0
      while [ "$(ls "$out"/rank*.started"$TORCHELASTIC_RESTART_COUNT" | wc -l)" -lt "$WORLD_SIZE" ] && [ $i -lt 100 ]; do nap 0.1; i=$((i+1)); done
      exit "$DSX_TEST_CODE"
    fi
    nap 60; exit 0 ;;
  sleep_first)  # the first start sleeps (to be stopped or killed by the test), the restart ends at once
    [ "$TORCHELASTIC_RESTART_COUNT" -ge 1 ] && exit 0
    nap 60; exit 0 ;;
  selfkill)
    if [ "$RANK" = "$DSX_TEST_RANK" ]; then nap 0.3; kill -9 $$; fi
    nap 60; exit 0 ;;
  shm_selfkill)  # a region named as libfabric's shm names its own, then SIGKILL before closing it
    head -c 4096 /dev/zero > "$DSX_TEST_SHM/$$:0:0"
    kill -9 $$ ;;
  ignore_term)  # every rank ignores SIGTERM: only SIGKILL stops it
    trap '' TERM
    if [ "$RANK" = "$DSX_TEST_RANK" ]; then nap 0.3; exit "$DSX_TEST_CODE"; fi
    nap 60; exit 0 ;;
  sleep) nap 60; exit 0 ;;
  ignore_stops)  # ignores SIGTERM and SIGINT: only SIGKILL stops it
    trap '' TERM INT
    nap 60; exit 0 ;;
  bar)  # a progress bar: a redraw without a newline, then a long pause, then the end of the line
    printf '\rstep 1 of 2'
    nap 3; printf '\rstep 2 of 2\n'; exit 0 ;;
esac
