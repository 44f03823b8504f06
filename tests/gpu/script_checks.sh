# shellcheck shell=bash
# Sourced by the shell tests of tests/gpu (test_run_sh.sh, test_bundle.sh): counting and printing
# their checks the same way. Each test ends with `checks_done NAME`.
fails=0 passes=0

pass() {  # pass <name>
  echo "ok   $1"
  passes=$((passes + 1))
}
fail() {  # fail <what went wrong>
  echo "FAIL $1"
  fails=$((fails + 1))
}

# judge <name> <want status> <want text> <status> <output>: the status is the one wanted and the
# output holds the text.
judge() {
  if [[ $4 != "$2" ]] || ! grep -qF -- "$3" <<<"$5"; then
    fail "$1: exit $4 (want $2), output should contain '$3':"
    printf '    %s\n' "${5//$'\n'/$'\n    '}"
  else
    pass "$1"
  fi
}

# holds <name> <file> <text>: the file holds the text.
holds() {
  if grep -qF -- "$3" "$2" 2>/dev/null; then pass "$1"; else fail "$1: $2 lacks '$3'"; fi
}

checks_done() {  # checks_done <name>: the tally, and the exit status
  echo "$1: $passes passed, $fails failed"
  ((fails == 0))
}
