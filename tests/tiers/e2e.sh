#!/usr/bin/env bash
# End-to-end tier: the real binary driven by real MCP clients (official SDK, inspector CLI).
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
export SBX_TEST_BIN=$PWD/$BUILD/mcp-sandbox
NODE=tests/e2e/node_modules/.bin/node22
if [ ! -x "$NODE" ]; then
    echo "not ok 1 - e2e: Node 22 is missing (run scripts/install-deps.sh --test)"
    exit 1
fi
# The timeout bounds each test file as well as each test: tools.test.mjs, 76 tests in a row, took
# over 60 s on a machine of this kind, and under ASan and UBSan (SANITIZED) every server call is
# several times slower.
timeout_ms=180000
[ "${SANITIZED:-0}" = 1 ] && timeout_ms=360000
# Under the sanitizers a server's report (a leak found at exit, say) goes to a file of its own:
# the tests end servers without reading their stderr, and a report there went unseen.
reports=
if [ "${SANITIZED:-0}" = 1 ]; then
    reports=$(mktemp -d /tmp/mcp-sandbox-e2e-reports.XXXXXX)
    chmod 1777 "$reports" # servers the tests start as another user write here too
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$reports/asan"
    export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}log_path=$reports/ubsan"
fi
(cd tests/e2e && ../../$NODE --test --test-reporter=tap --test-concurrency=2 \
    --test-timeout=$timeout_ms ./*.test.mjs)
rc=$?
if [ -n "$reports" ]; then
    found=$(find "$reports" -type f | sort)
    if [ -n "$found" ]; then
        echo "not ok 1 - e2e: no server left a sanitizer report"
        for f in $found; do
            echo "# $f:"
            head -60 "$f" | sed 's/^/#   /'
        done
        rc=1
    else
        echo "ok 1 - e2e: no server left a sanitizer report"
    fi
    rm -rf "$reports"
fi
exit $rc
