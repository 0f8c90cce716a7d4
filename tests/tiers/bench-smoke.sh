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
m = d["machine_costs"]
for k in ("syscall_ns", "page_fault_ns", "pipe_round_trip_us"):
    assert m[k]["median"] > 0 and m[k]["min"] > 0, k
for k, v in list(m["spawn_us"].items()) + list(m["clone_reaped_us"].items()):
    assert v.get("median", 0) > 0 or len(v.get("error", "")) > 3, (k, v)  # a figure or why not
assert m["clone_reaped_us"]["fork"]["median"] > 0 and m["spawn_us"]["static_no_libc"]["median"] > 0
peers = d["cold_one_shot"]["peers"]
assert len(peers) >= 8
for p in peers:
    assert "not_run" in p or (p["median_ms"] > 0 and p["ratio_median"] > 0 and p["n"] > 0), p
    assert "not_run" not in p or len(p["not_run"]) > 10, p  # a reason, not a blank
names = " ".join(p["name"] for p in peers)
for runtime in ("crun", "runc", "runsc"):
    assert runtime in names, runtime  # measured, or listed with the reason it could not run
engine = [p for p in peers if p["name"].startswith("mcp-sandbox")][0]
assert "median_ms" in engine, "the engine itself must run"
assert d["cold_one_shot"]["engine_setup_us"]["median"] > 0
for row in d["warm_execution"]["rows"]:
    for k in ("mcp_sandbox_stdio", "mcp_sandbox_http", "seed_subprocess", "raw_floor_no_sandbox"):
        assert row[k]["median_us"] > 0, (row["code"], k)
    assert row["mcp_sandbox_http"]["errors"] == 0, row["mcp_sandbox_http"]
t = d["time_to_ready"]
for k in ("create_sandbox_from_pool", "create_sandbox_no_pool_until_first_run",
          "create_run_close_print1", "bare_python_print1"):
    assert t[k]["median_us"] > 0, k
assert [c["pool_size"] for c in t["churn"]] == [0, 2]
for c in t["churn"]:
    assert c["cycles"] > 0 and c["ping"]["n"] > 0 and c["ping"]["median_us"] > 0, c
# MemAvailable moves with everything else on the machine; the summed PSS is the steady figure.
assert d["density"]["rows"] and all(isinstance(r["mib_per_sandbox_memavailable"], float)
                                    and r["mib_per_sandbox_pss"] > 0 for r in d["density"]["rows"])
h = d["http_throughput"]
assert h["levels"] and h["cold_levels"]
for lvl in h["levels"] + h["cold_levels"]:
    assert lvl["calls_per_s"] > 0 and lvl["errors"] == 0 and lvl["setup_errors"] == 0, lvl
    assert lvl["cpu_us_per_call"]["server"] > 0, lvl
for lvl in h["levels"]:
    assert lvl["raw_floor"]["calls_per_s"] > 0 and lvl["ratio_to_raw_floor"] > 0, lvl
for k in ("one_sandbox", "many_sandboxes"):
    f = d["floods"][k]
    assert f["seconds"] > 0 and f["rss_growth_kib"] >= 0 and f["ping"]["n"] > 0, k
PY
[ -s "$out/latest.md" ] && tap_ok "bench: Markdown generated from the JSON" || tap_fail "bench: Markdown generated"
for png in cold_one_shot warm_execution time_to_ready http_throughput density floods; do
    [ -s "$out/$png.png" ] && tap_ok "bench: $png chart drawn" || tap_fail "bench: $png chart drawn"
done
rm -rf "$out"
tap_done
