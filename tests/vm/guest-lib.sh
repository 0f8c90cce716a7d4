# TAP helpers for the VM guests (busybox sh and bash alike): they print numbered lines that the
# host relays into its own plan. Copied into each guest image and sourced there.
N=0
ok() { N=$((N + 1)); echo "ok $N - $*"; }
fail() { N=$((N + 1)); echo "not ok $N - $*"; }
# expect NAME PATTERN OUTPUT: ok when OUTPUT matches the extended regex PATTERN.
expect() {
    if printf '%s\n' "$3" | grep -qE -- "$2"; then ok "$1"; else
        fail "$1"
        printf '%s\n' "$3" | head -5 | sed 's/^/#   got: /'
    fi
}
# expect_not NAME PATTERN OUTPUT: ok when OUTPUT does not match.
expect_not() {
    if printf '%s\n' "$3" | grep -qE -- "$2"; then
        fail "$1"
        printf '%s\n' "$3" | head -5 | sed 's/^/#   got: /'
    else ok "$1"; fi
}
backend_of() { sed -n 's/.*"limits_backend":"\([^"]*\)".*/\1/p'; }
