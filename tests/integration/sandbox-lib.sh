# Helpers for integration cases: run the static probe (or any command) in a real sandbox.
# The probe enters through stdin into /workspace, so the sandbox needs no extra bind mount.
: "${BUILD:=build}"
SBX="$PWD/$BUILD/mcp-sandbox"
PROBE="$PWD/$BUILD/tests/probe"

# sbx_probe [RUN-OPTIONS...] -- OP [ARGS...]: prints the probe's line (and the run's stderr).
sbx_probe() {
    local opts=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do opts+=("$1"); shift; done
    shift
    "$SBX" run "${opts[@]}" -- /bin/sh -c 'cat > /workspace/probe && chmod 700 /workspace/probe && exec /workspace/probe "$@"' probe "$@" < "$PROBE" 2>&1
}

# expect NAME PATTERN OUTPUT: ok when OUTPUT matches the extended regex PATTERN.
expect() {
    local name=$1 pat=$2 out=$3
    if printf '%s\n' "$out" | grep -qE -- "$pat"; then
        tap_ok "$name"
    else
        tap_fail "$name"
        printf '%s\n' "$out" | head -5 | sed 's/^/#   got: /'
    fi
}

is_root() { [ "$(id -u)" = 0 ]; }
