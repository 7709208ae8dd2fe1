# cli_common.sh — what the CLI test scripts share; source it after setting dtnn, tmp and
# failures=0.
# expect CODE PATTERN -- ARGS...: `dtnn ARGS` must exit CODE with stderr matching PATTERN (an
# extended regex); prints "ok: ..." with its first line, or "FAIL: ..." and counts a failure.
# Each run has stdin closed and a limit of ${expect_timeout:-600} s, so a command that blocks
# fails (exit 124) instead of stalling the suite.
expect() {
    local code=$1 pattern=$2
    shift 3
    timeout "${expect_timeout:-600}" "$dtnn" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    local rc=$?
    if [[ $rc -ne $code ]] || ! grep -qE -e "$pattern" "$tmp/err"; then
        echo "FAIL: dtnn $* -> exit $rc (want $code), stderr:"
        sed 's/^/    /' "$tmp/err"
        failures=$((failures + 1))
    else
        echo "ok: dtnn $* -> $(head -n1 "$tmp/err")"
    fi
}
