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
cd tests/e2e && exec ../../$NODE --test --test-reporter=tap --test-concurrency=2 --test-timeout=60000 ./*.test.mjs
