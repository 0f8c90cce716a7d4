#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance, Node 22) against the
# real binary over Streamable HTTP with the test fixtures: one TAP line per active scenario.
# The pending scenarios run too; their outcome is printed as comments, not counted.
cd "$(dirname "$0")/../.."
. tests/lib.sh
BUILD=${1:-build}
NODE=tests/e2e/node_modules/.bin/node22
SUITE=tests/e2e/node_modules/@modelcontextprotocol/conformance/dist/index.js
if [ ! -x "$NODE" ] || [ ! -f "$SUITE" ]; then
    tap_fail "conformance: Node 22 and the suite are installed (scripts/install-deps.sh --test)"
    tap_done
    exit 1
fi
work=$(mktemp -d /tmp/mcp-sandbox-conformance.XXXXXX)
"$BUILD/mcp-sandbox" serve --http 127.0.0.1:0 --test-fixtures --state-dir "$work/state" \
    >/dev/null 2>"$work/server.log" &
server=$!
port=
for _ in $(seq 1 100); do
    port=$(grep -o '"msg":"http listening".*"port":"[0-9]*"' "$work/server.log" 2>/dev/null |
        grep -o '"port":"[0-9]*"' | grep -o '[0-9]*')
    [ -n "$port" ] && break
    sleep 0.05
done
if [ -z "$port" ]; then
    sed 's/^/# /' "$work/server.log"
    tap_fail "conformance: server listening"
    kill "$server" 2>/dev/null
    rm -rf "$work"
    tap_done
    exit 1
fi
url=http://127.0.0.1:$port/mcp
"$NODE" "$SUITE" server --url "$url" --suite active -o "$work/results" >"$work/active.log" 2>&1
# The summary lines read "✓ scenario: N passed, M failed" or "✗ ...".
scenarios=0
while IFS= read -r line; do
    name=${line#* }
    case "$line" in
        "✓ "*) tap_ok "conformance: $name"; scenarios=$((scenarios + 1)) ;;
        "✗ "*) tap_fail "conformance: $name"; scenarios=$((scenarios + 1)) ;;
    esac
done < <(sed -n '/=== SUMMARY ===/,$p' "$work/active.log")
if [ "$scenarios" -lt 30 ]; then
    tail -40 "$work/active.log" | sed 's/^/# /'
    tap_fail "conformance: the active suite ran (saw $scenarios scenarios, expected 30)"
fi
"$NODE" "$SUITE" server --url "$url" --suite pending >"$work/pending.log" 2>&1
sed -n '/=== SUMMARY ===/,$p' "$work/pending.log" | grep -E '^(✓|✗|Total)' | sed 's/^/# pending: /'
kill -TERM "$server" 2>/dev/null
wait "$server" 2>/dev/null
rm -rf "$work"
tap_done
