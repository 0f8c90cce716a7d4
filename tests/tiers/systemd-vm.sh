#!/usr/bin/env bash
# cgroup v2 under systemd, in a VM: a stock Debian 12 (cgroup v2 only, systemd) where
# mcp-sandbox starts from a cgroup it shares with others, as from a login shell, and must get a
# delegated scope of its own from systemd (src/cli/own_scope.c): `run`, and `serve` with the
# sandboxes it keeps. Debian's cloud kernel boots under qemu (software emulation) a
# debootstrapped Debian 12 with systemd, python3 and the server's libraries, that
# scripts/install-deps.sh --test builds once into .deps/vm/debian.cpio; mcp-sandbox (static),
# mcp-sandbox-server (dynamic, on the guest's own libraries), test_jail_cgroup and
# tests/vm/systemd-guest.sh go in a second archive. The guest prints TAP; this relays it.
cd "$(dirname "$0")/../.."
. tests/lib.sh
. tests/vm/boot.sh
BUILD=${1:-build}
KERNEL=.deps/vm/vmlinuz
ROOTFS=.deps/vm/debian.cpio
SBX=$BUILD/mcp-sandbox

vm_require systemd-vm "$KERNEL" "$ROOTFS" "$BUILD/mcp-sandbox-server" -- "$SBX"

work=$(mktemp -d /tmp/mcp-sandbox-vm.XXXXXX)
trap 'rm -rf "$work"' EXIT
extra=$work/extra
mkdir -p "$extra"/{usr/local/bin,usr/local/lib/mcp-test,etc/systemd/system,newroot}
cp "$SBX" "$extra/usr/local/bin/mcp-sandbox"
cp "$BUILD/mcp-sandbox-server" "$extra/usr/local/bin/mcp-sandbox-server"
# The unit test that checks where a sandbox and its spawner sit, with the libraries it needs
# beyond libc (jansson, cmocka), found through LD_LIBRARY_PATH so the guest's own stay as they are.
cp "$BUILD/tests/test_jail_cgroup" "$extra/usr/local/lib/mcp-test/"
for lib in $(ldd "$BUILD/tests/test_jail_cgroup" | awk '$3 ~ /^\// {print $3}'); do
    case $lib in */libc.so.*) ;; *) cp "$lib" "$extra/usr/local/lib/mcp-test/" ;; esac
done
cp tests/vm/systemd-guest.sh "$extra/usr/local/lib/mcp-test/guest.sh"
cp tests/vm/guest-lib.sh "$extra/usr/local/lib/mcp-test/guest-lib.sh"
# The initramfs root cannot be pivoted away from (the sandbox's pivot_root would fail): copy it
# into a tmpfs and start systemd there.
cat > "$extra/shim" <<'EOT'
#!/bin/sh
mount -t tmpfs -o mode=0755,size=90% root /newroot
for d in /*; do
    case $d in /proc|/sys|/dev|/newroot|/shim) ;; *) cp -a "$d" /newroot/ ;; esac
done
mkdir -p /newroot/proc /newroot/sys /newroot/dev /newroot/tmp
exec switch_root /newroot /lib/systemd/systemd
EOT
cat > "$extra/etc/systemd/system/mcp-test.service" <<'EOT'
[Unit]
Description=mcp-sandbox under systemd
After=basic.target
[Service]
Type=oneshot
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS0
ExecStart=/bin/bash /usr/local/lib/mcp-test/guest.sh
ExecStopPost=/bin/systemctl poweroff --force --force
EOT
chmod 755 "$extra/shim" "$extra/usr/local/lib/mcp-test/guest.sh"
# A second archive after the first: the kernel unpacks both, the later files on top.
(cd "$extra" && find . | busybox cpio -o -H newc 2>/dev/null) > "$work/extra.cpio"
cat "$ROOTFS" "$work/extra.cpio" > "$work/initrd.cpio"

vm_boot systemd-vm "$KERNEL" "$work/initrd.cpio" 2048 \
    "rdinit=/shim systemd.unit=mcp-test.service" "$work/console.log"
tap_done
