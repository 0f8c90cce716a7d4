# Network: only loopback exists; nothing on the host or outside is reachable.
out=$(sbx_probe -- ifaces); expect "net: only lo exists" "ifaces ok" "$out"
out=$(sbx_probe -- tcp 10.255.255.1 80); expect "net: TCP to an outside address fails" "errno=101 ENETUNREACH" "$out"
out=$(sbx_probe -- udp 10.255.255.1 53); expect "net: UDP/DNS to an outside address goes nowhere" "errno=101 ENETUNREACH" "$out"
# A host listener on 127.0.0.1 and an abstract unix socket, started by this test.
port=$((20000 + RANDOM % 20000))
ready=$(mktemp "${TMPDIR:-/tmp}/mcp-sbx-net.XXXXXX")
/usr/bin/python3 - "$port" "$ready" <<'PY' &
import socket, sys, time
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind(("127.0.0.1", int(sys.argv[1]))); t.listen(8)
u = socket.socket(socket.AF_UNIX); u.bind("\0mcp-sandbox-test-" + sys.argv[1]); u.listen(8)
open(sys.argv[2], "w").write("up")
time.sleep(8)
PY
listener=$!
# Wait until both sockets listen (a loaded machine starts Python slowly), at most 5 s.
for _ in $(seq 1 100); do [ -s "$ready" ] && break; sleep 0.05; done
rm -f "$ready"
out=$("$PROBE" tcp 127.0.0.1 "$port"); expect "net: (control) host listener reachable from the host" "tcp ok" "$out"
out=$("$PROBE" abstract "mcp-sandbox-test-$port"); expect "net: (control) abstract socket reachable from the host" "abstract ok" "$out"
out=$(sbx_probe -- tcp 127.0.0.1 "$port"); expect "net: host 127.0.0.1 listener unreachable" "errno=111 ECONNREFUSED" "$out"
out=$(sbx_probe -- abstract "mcp-sandbox-test-$port"); expect "net: host abstract unix socket unreachable" "errno=(111 ECONNREFUSED|1 EPERM)" "$out"
out=$("$SBX" run -- /usr/bin/python3 -I -c '
import socket
s=socket.socket(); s.bind(("127.0.0.1",8000)); s.listen(1)
c=socket.create_connection(("127.0.0.1",8000)); a,_=s.accept(); c.send(b"hi"); print(a.recv(2).decode())' 2>&1)
expect "net: loopback inside the sandbox works" "^hi$" "$out"
kill "$listener" 2>/dev/null; wait "$listener" 2>/dev/null
# Every sandbox has a network namespace of its own, also when the spawner made it ahead of the
# clone: a listener in one sandbox is out of reach of the next.
held=$(mktemp "${TMPDIR:-/tmp}/mcp-sbx-net.XXXXXX")
"$SBX" run -- /usr/bin/python3 -I -c '
import socket, time
s=socket.socket(); s.bind(("127.0.0.1",8000)); s.listen(1); print("listening", flush=True)
time.sleep(6)' > "$held" 2>&1 &
holder=$!
for _ in $(seq 1 100); do grep -q listening "$held" && break; sleep 0.05; done
expect "net: (control) a sandbox listens on its 127.0.0.1:8000" "^listening$" "$(cat "$held")"
out=$("$SBX" run -- /usr/bin/python3 -I -c '
import socket
try:
    socket.create_connection(("127.0.0.1",8000), timeout=2); print("connected")
except OSError as e:
    print("errno", e.errno)' 2>&1)
expect "net: another sandbox's 127.0.0.1 listener is unreachable" "^errno 111$" "$out"
kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
rm -f "$held"
# The namespace can be read but not changed: no capability over it is left in the sandbox.
out=$("$SBX" run -- /usr/bin/python3 -I -c '
import fcntl, socket, struct
s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
flags=struct.unpack("16sh14x", fcntl.ioctl(s, 0x8913, struct.pack("16sh14x", b"lo", 0)))[1]
print("lo up" if flags & 1 else "lo down")
try:
    fcntl.ioctl(s, 0x8914, struct.pack("16sh14x", b"lo", flags & ~1)); print("changed")
except OSError as e:
    print("errno", e.errno)' 2>&1)
expect "net: (control) loopback's flags are readable and it is up" "^lo up$" "$out"
expect "net: bringing loopback down is refused" "^errno 1$" "$out"
# Who owns the namespace: as root the spawner's helper makes it ahead of the clone in a user
# namespace of its own, which the sandbox cannot even name; rootless the clone makes it in the
# sandbox's.
out=$("$SBX" run -- /usr/bin/python3 -I -c '
import fcntl, os
ns = os.open("/proc/self/ns/net", os.O_RDONLY)
try:
    owner = fcntl.ioctl(ns, 0xb701)  # NS_GET_USERNS
    print("owner", "self" if os.fstat(owner).st_ino == os.stat("/proc/self/ns/user").st_ino else "other")
except OSError as e:
    print("errno", e.errno)' 2>&1)
if is_root; then
    expect "net: the namespace belongs to a user namespace out of the sandbox's reach" "^errno 1$" "$out"
else
    expect "net: the namespace belongs to the sandbox's own user namespace" "^owner self$" "$out"
fi
# Device events (uevents) go to every network namespace the host's user namespace owns: a
# listener in one made by `unshare -n` hears a synthetic "change" of /dev/zero, the sandbox's
# does not. Root only: triggering one writes to /sys.
trigger=/sys/devices/virtual/mem/zero/uevent
if is_root && [ -w "$trigger" ]; then
    ue_listen='import socket
s = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 15)  # NETLINK_KOBJECT_UEVENT
s.bind((0, 1))
s.settimeout(3)
print("bound", flush=True)
try:
    print("uevent", s.recv(65536).split(b"\0")[0].decode())
except OSError as e:
    print("none", e)'
    ue_dir=$(mktemp -d)
    unshare -n /usr/bin/python3 -I -c "$ue_listen" > "$ue_dir/host" 2>&1 &
    ue_host=$!
    "$SBX" run -- /usr/bin/python3 -I -c "$ue_listen" > "$ue_dir/sandbox" 2>&1 &
    ue_sbx=$!
    for _ in $(seq 50); do
        grep -q bound "$ue_dir/host" 2>/dev/null && grep -q bound "$ue_dir/sandbox" 2>/dev/null && break
        sleep 0.1
    done
    echo change > "$trigger"
    wait $ue_host $ue_sbx
    expect "net: (control) a host-owned network namespace hears a uevent" "^uevent change@/devices/virtual/mem/zero" "$(cat "$ue_dir/host")"
    expect "net: the sandbox hears no uevent" "^none " "$(cat "$ue_dir/sandbox")"
    rm -rf "$ue_dir"
fi
