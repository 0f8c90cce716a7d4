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
