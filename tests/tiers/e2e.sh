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
cd tests/e2e && exec ../../$NODE --test --test-reporter=tap --test-concurrency=2 --test-timeout=$timeout_ms ./*.test.mjs
