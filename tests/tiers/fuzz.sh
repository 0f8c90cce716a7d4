#!/usr/bin/env bash
# Builds every libFuzzer target (clang, ASan+UBSan) and runs each for a bounded time
# (FUZZ_SECONDS, default 45): one TAP line per target. `make fuzz` runs them longer.
cd "$(dirname "$0")/../.."
. tests/lib.sh
secs=${FUZZ_SECONDS:-45}
if ! make --no-print-directory -s fuzz-build >build-fuzz.log 2>&1; then
    tail -30 build-fuzz.log | sed 's/^/# /'
    tap_fail "fuzz targets build"
    tap_done
    exit 1
fi
tap_ok "fuzz targets build"
for bin in build-fuzz/fuzz_*; do
    [ -x "$bin" ] || continue
    name=$(basename "$bin")
    corpus=$(mktemp -d)
    seeds=tests/fuzz/seeds/$name
    if "$bin" -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1 "$corpus" ${seeds:+$( [ -d "$seeds" ] && echo "$seeds")} >"$corpus.log" 2>&1; then
        runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$corpus.log" | grep -oE '[0-9]+$')
        tap_ok "$name ran clean for ${secs}s (${runs:-?} inputs)"
    else
        grep -E 'ERROR|SUMMARY|==[0-9]+==' "$corpus.log" | head -20 | sed 's/^/# /'
        tap_fail "$name ran clean for ${secs}s"
    fi
    rm -rf "$corpus" "$corpus.log"
done
tap_done
