#!/usr/bin/env bash
# scripts/eval_reader.sh refuses bad arguments with rc 2 and a message naming what is wrong,
# before it evaluates anything or writes a report.
#   eval_reader_refusals.sh SCRIPT ATTUNE
set -uo pipefail
SCRIPT=$1
ATTUNE=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
expect() {  # message, then the command's environment and arguments
  local want=$1
  shift
  local out rc
  out=$(env "$@" 2>&1)
  rc=$?
  if [ "$rc" -ne 2 ] || ! grep -qF -- "$want" <<<"$out"; then
    echo "FAIL: $* -> rc $rc, output: $out (wanted rc 2 and \"$want\")"
    fail=1
  else
    echo "ok: $want"
  fi
}
mkdir -p "$TMP/reader"
echo '{}' >"$TMP/reader/config.json"
expect "usage:" ATTUNE="$ATTUNE" bash "$SCRIPT"
expect "usage:" ATTUNE="$ATTUNE" bash "$SCRIPT" train "$TMP/reader"
expect "no attune binary at $TMP/none" ATTUNE="$TMP/none" bash "$SCRIPT" dev "$TMP/reader"
expect "no reader at $TMP/missing" ATTUNE="$ATTUNE" bash "$SCRIPT" dev "$TMP/missing"
expect "no $TMP/eval/choice.json: run the dev phase first" ATTUNE="$ATTUNE" bash "$SCRIPT" test "$TMP/reader"
# Nothing was evaluated: no report is there.
if ls "$TMP/eval"/*.json >/dev/null 2>&1; then
  echo "FAIL: a refused run wrote reports: $(ls "$TMP/eval")"
  fail=1
fi
exit $fail
