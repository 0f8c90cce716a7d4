#!/usr/bin/env bash
# The benchmark in --quick mode as a smoke test: every scenario must produce numbers (or say
# why a peer could not run). It never judges speed; bench/README.md explains the targets.
cd "$(dirname "$0")/../.."
. tests/lib.sh
out=$(mktemp -d)
if bench/run --quick --out "$out" >"$out/log" 2>&1; then
    tap_ok "bench --quick completed"
else
    tail -20 "$out/log" | sed 's/^/# /'
    tap_fail "bench --quick completed"
fi
/usr/bin/python3 - "$out/latest.json" <<'PY' && tap_ok "bench: every peer has numbers or a reason" || tap_fail "bench: every peer has numbers or a reason"
import json, sys
d = json.load(open(sys.argv[1]))
peers = d["cold_one_shot"]["peers"]
assert len(peers) >= 5
for p in peers:
    assert "not_run" in p or (p["median_ms"] > 0 and p["ratio_median"] > 0), p
engine = [p for p in peers if p["name"].startswith("mcp-sandbox")][0]
assert "median_ms" in engine, "the engine itself must run"
assert d["cold_one_shot"]["engine_setup_us"]["median"] > 0
PY
[ -s "$out/latest.md" ] && tap_ok "bench: Markdown generated from the JSON" || tap_fail "bench: Markdown generated"
[ -s "$out/cold_one_shot.png" ] && tap_ok "bench: chart drawn" || tap_fail "bench: chart drawn"
rm -rf "$out"
tap_done
