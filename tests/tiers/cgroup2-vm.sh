#!/usr/bin/env bash
# The cgroup v2 backend, in a VM: this machine's cgroups are a v1+v2 hybrid, so the v2 path
# (a delegated subtree, the step into a leaf, cgroup.kill) cannot run here. Debian's cloud
# kernel boots under qemu (software emulation, a few seconds) with a busybox initramfs, the
# static mcp-sandbox, the static probe and vm-sandboxes (the server's cgroup use), and runs
# tests/vm/cgroup2-guest.sh as init. The guest prints TAP; this script relays it.
# scripts/install-deps.sh --test fetches the kernel.
cd "$(dirname "$0")/../.."
. tests/lib.sh
. tests/vm/boot.sh
BUILD=${1:-build}
KERNEL=.deps/vm/vmlinuz
SBX=$BUILD/mcp-sandbox
PROBE=$BUILD/tests/probe
SANDBOXES=$BUILD/tests/vm-sandboxes

vm_require cgroup2-vm "$KERNEL" -- "$SBX" "$PROBE" "$SANDBOXES"

work=$(mktemp -d /tmp/mcp-sandbox-vm.XXXXXX)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root"/{usr/bin,usr/sbin,usr/lib,proc,sys,dev,tmp,etc,root,newroot}
ln -s usr/bin "$root/bin"
ln -s usr/sbin "$root/sbin"
ln -s usr/lib "$root/lib"
cp "$(command -v busybox)" "$root/usr/bin/busybox"
busybox --install -s "$root/usr/bin" 2>/dev/null
# --install links to the running binary's own path; point every applet at the copy.
for l in "$root"/usr/bin/*; do [ -L "$l" ] && ln -sf busybox "$l"; done
cp "$SBX" "$root/usr/bin/mcp-sandbox"
cp "$PROBE" "$root/usr/bin/probe"
cp "$SANDBOXES" "$root/usr/bin/vm-sandboxes"
printf 'root:x:0:0::/root:/bin/sh\nnobody:x:65534:65534::/:/bin/sh\n' > "$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$root/etc/group"
cp tests/vm/cgroup2-guest.sh "$root/init2"
cp tests/vm/guest-lib.sh "$root/guest-lib.sh"
# The initramfs root cannot be pivoted away from (the sandbox's pivot_root would fail):
# copy it into a tmpfs and switch there first.
cat > "$root/init" <<'EOF'
#!/bin/sh
mount -t tmpfs -o mode=0755 root /newroot
cp -a /usr /bin /sbin /lib /etc /root /init2 /guest-lib.sh /newroot/
mkdir -p /newroot/proc /newroot/sys /newroot/dev /newroot/tmp /newroot/run
exec switch_root /newroot /init2
EOF
chmod 755 "$root/init" "$root/init2"
(cd "$root" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1 > "$work/initrd.gz")

vm_boot cgroup2-vm "$KERNEL" "$work/initrd.gz" 1024 "rdinit=/init" "$work/console.log"
tap_done
