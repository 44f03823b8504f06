#!/usr/bin/env bash
# bench_swap end to end on small files beside fio: both tables come out with every figure
# positive, the scratch files are gone afterwards, and bad input stops with a clear message.
# usage: test_bench_swap.sh BENCH_SWAP SCRATCH_PARENT
set -euo pipefail
bench=$1
work=$(mktemp -d "$2/test_bench_swap.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$("$bench" --dir "$work" --mib 16 --rounds 2 --setting 1,8,1 --setting 8,8,2)
echo "$out"
# The grid: one row per setting, six positive bandwidths each (fresh write, overwrite, read).
for setting in "1M, 8, 1" "8M, 8, 2"; do
  row=$(grep -F "| $setting |" <<<"$out") || fail "no grid row for $setting"
  awk -F'|' '{ for (i = 3; i <= 8; i++) if ($i + 0 <= 0) exit 1 }' <<<"$row" ||
    fail "a zero bandwidth in: $row"
done
# The best-setting table: medians, bests and ratios all positive, for each direction.
for what in "write (overwrite)" "read" "write (fresh fallocated file)"; do
  row=$(grep -F "| $what |" <<<"$out") || fail "no row for $what"
  awk -F'|' '{ for (i = 4; i <= 10; i++) if (i != 6 && $i + 0 <= 0) exit 1 }' <<<"$row" ||
    fail "a zero figure in: $row"
done
[[ -z $(find "$work" -type f) ]] || fail "scratch files left behind: $(find "$work" -type f)"

# Bad input: the reason, and no table.
if err=$("$bench" --dir "$work/missing" --mib 16 --rounds 1 2>&1); then fail "a missing --dir ran"; fi
grep -q "$work/missing is not a directory" <<<"$err" || fail "missing --dir not named: $err"
if err=$("$bench" --dir "$work" --setting 8,x 2>&1); then fail "a bad --setting ran"; fi
grep -q "expected MiB,depth,workers" <<<"$err" || fail "bad --setting not explained: $err"
if err=$("$bench" --dir "$work" --mib 10 2>&1); then fail "--mib 10 ran"; fi
grep -q "multiple of 16" <<<"$err" || fail "bad --mib not explained: $err"
echo "ok"
