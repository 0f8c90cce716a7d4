# Sourced by the VM tiers (after tests/lib.sh): boots Debian's cloud kernel under qemu (software
# emulation) with an initramfs, relays the TAP that the guest prints on its serial console, and
# fails unless the guest printed "# guest: done".
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
