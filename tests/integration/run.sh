#!/usr/bin/env bash
# Integration tier: every isolation rule checked in a real sandbox, where it allows and where
# it denies. Runs as root, and again rootless from tests/tiers/rootless.sh (names prefixed
# with $TAP_PREFIX there).
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
. tests/lib.sh
. tests/integration/sandbox-lib.sh
if [ -n "${TAP_PREFIX:-}" ]; then
    eval "_ok() { $(declare -f tap_ok | sed '1,2d;$d'); }"
    tap_ok() { TAP_N=$((TAP_N + 1)); echo "ok $TAP_N - $TAP_PREFIX$*"; }
    tap_fail() { TAP_N=$((TAP_N + 1)); TAP_FAILED=$((TAP_FAILED + 1)); echo "not ok $TAP_N - $TAP_PREFIX$*"; }
    tap_skip() { TAP_N=$((TAP_N + 1)); echo "ok $TAP_N - $TAP_PREFIX$1 # SKIP $2"; }
fi
for t in tests/integration/t_*.sh; do
    echo "# --- $t"
    . "$t"
done
tap_done
