# Sourced by the VM tiers (after tests/lib.sh): checks their parts, boots Debian's cloud kernel
# under qemu (software emulation) with an initramfs, relays the TAP that the guest prints on its
# serial console, and fails unless the guest printed "# guest: done".

# vm_require NAME FILE... -- BINARY...: ends the tier with a failure unless qemu, busybox and
# every FILE are there (scripts/install-deps.sh --test puts them there) and every BINARY is
# static (the guests have no libraries for it).
vm_require() {
    local name=$1 missing=""
    shift
    command -v qemu-system-x86_64 >/dev/null || missing+=" qemu-system-x86"
    busybox --help 2>&1 | head -1 | grep -q BusyBox || missing+=" busybox-static"
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        [ -s "$1" ] || missing+=" $1"
        shift
    done
    [ $# -gt 0 ] && shift
    if [ -n "$missing" ]; then
        tap_fail "$name: the VM's parts are installed (missing:$missing; run scripts/install-deps.sh --test)"
        tap_done
        exit 1
    fi
    local bin
    for bin; do
        if [ ! -x "$bin" ] || readelf -l "$bin" 2>/dev/null | grep -q INTERP; then
            tap_fail "$name: $bin is a static binary (the VM has no libraries)"
            tap_done
            exit 1
        fi
    done
}

# vm_boot NAME KERNEL INITRD MEMORY_MB APPEND LOG
vm_boot() {
    local name=$1 kernel=$2 initrd=$3 mem=$4 append=$5 log=$6 rc
    timeout 600 qemu-system-x86_64 -accel tcg -machine q35 -cpu max -smp 2 -m "$mem" \
        -nographic -no-reboot -kernel "$kernel" -initrd "$initrd" \
        -append "console=ttyS0 quiet panic=-1 $append" </dev/null > "$log" 2>&1
    rc=$?
    tap_relay "" < <(tr -d '\r' < "$log" | grep -E '^(ok|not ok) |^# ')
    if ! tr -d '\r' < "$log" | grep -q '^# guest: done'; then
        tap_fail "$name: the guest ran to the end (qemu exit $rc)"
        tr -d '\r' < "$log" | tail -20 | sed 's/^/#   /'
    fi
}
