# Shared helpers for the shell integration tests: check NAME CMD... runs a check,
# counts it, and shows the output of failures. finish prints "N passed, M failed"
# and exits non-zero on any failure.
passed=0
failed=0
TW_TMP=$(mktemp -d /tmp/tw-test.XXXXXX)
trap 'rm -rf "$TW_TMP"' EXIT
# Agents killed on purpose cannot remove their working directories
# (tensorwire-agent-* in the temporary directory): here those go with the test's.
export TMPDIR=$TW_TMP

check() {
  local name=$1
  shift
  local out
  if out=$("$@" 2>&1); then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL: $name"
    echo "$out" | head -20 | sed 's/^/    /'
  fi
}

finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
