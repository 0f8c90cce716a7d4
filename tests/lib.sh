# Shared helpers for shell test tiers: emit TAP lines that tests/run-all.sh counts.
# Source it, call tap_ok/tap_fail/tap_skip, and finish with tap_done.
TAP_N=0
TAP_FAILED=0
tap_ok()   { TAP_N=$((TAP_N + 1)); echo "ok $TAP_N - $*"; }
tap_fail() { TAP_N=$((TAP_N + 1)); TAP_FAILED=$((TAP_FAILED + 1)); echo "not ok $TAP_N - $*"; }
# tap_skip NAME REASON
tap_skip() { TAP_N=$((TAP_N + 1)); echo "ok $TAP_N - $1 # SKIP $2"; }
# tap_check NAME CMD...: ok if CMD exits 0.
tap_check() {
    local name=$1; shift
    if "$@"; then tap_ok "$name"; else tap_fail "$name"; fi
}
tap_done() { echo "1..$TAP_N"; [ "$TAP_FAILED" -eq 0 ]; }
# tap_relay PREFIX: read another runner's TAP on stdin and re-emit its top-level results in
# this plan's numbering, names prefixed; everything else becomes a comment. Sets TAP_RELAY_RC
# to 1 if any relayed line failed.
tap_relay() {
    local prefix=$1 line name
    while IFS= read -r line; do
        case "$line" in
            "ok "*|"not ok "*)
                TAP_N=$((TAP_N + 1))
                name=$(printf '%s' "$line" | sed -E 's/^(not )?ok [0-9]+ ?-? ?//')
                case "$line" in "not ok"*) TAP_FAILED=$((TAP_FAILED + 1)); echo "not ok $TAP_N - $prefix$name" ;;
                                *) echo "ok $TAP_N - $prefix$name" ;; esac ;;
            1..*) ;;
            *) echo "# $line" ;;
        esac
    done
}
