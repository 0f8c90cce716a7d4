// install_packages and network: packages, end to end: the real binary over stdio with the
// official SDK, real sandboxes, real pip, and a local PEP 503 index (wheels built by
// pkgindex.py) served on 127.0.0.1. The egress proxy is checked from inside the sandbox: what
// it lets through, and each way it refuses.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync, chmodSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, normalize } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { connect, cleanup, startHttp, stopHttp } from './helpers.mjs';

const dir = mkdtempSync(join(tmpdir(), 'sbx-e2e-packages-'));
chmodSync(dir, 0o755);
const indexDir = join(dir, 'index');
const requests = [];
// Pages served per project that has a later page (pkgindex.py): the first request gets the
// page as it was, every later one the page as it changed.
const pageServed = new Map();
let index, secret, tunnelTarget, indexPort, secretPort, tunnelPort, blackhole, blackholePort;

// A listener whose accept queue is full: further SYNs to it are dropped, so a connect hangs.
const BLACKHOLE = `
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(0)
held = []
for _ in range(3):
    c = socket.socket()
    c.setblocking(False)
    try:
        c.connect(s.getsockname())
    except BlockingIOError:
        pass
    held.append(c)
print(s.getsockname()[1], flush=True)
time.sleep(3600)
`;

// The index: static files, except a project whose page never comes (for the install timeout).
function serveIndex(req, res) {
  requests.push(req.url);
  if (req.url.startsWith('/simple/sbxslow')) return; // hangs until the client gives up
  if (req.url.startsWith('/simple/sbxhuge')) { // a page larger than a sandbox's memory
    res.writeHead(200, { 'Content-Type': 'text/html' });
    const chunk = Buffer.alloc(1 << 20, 'a');
    let sent = 0;
    const pump = () => {
      while (sent < 1024) {
        sent++;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      res.end();
    };
    res.on('close', () => { sent = Infinity; });
    pump();
    return;
  }
  const path = normalize(join(indexDir, decodeURIComponent(req.url.split('?')[0])));
  let file = path.endsWith('/') ? join(path, 'index.html') : path;
  if (path.endsWith('/') && existsSync(join(path, 'later.html'))) {
    const seen = pageServed.get(path) || 0;
    pageServed.set(path, seen + 1);
    if (seen) file = join(path, 'later.html');
  }
  if (!file.startsWith(indexDir) || !existsSync(file)) {
    res.writeHead(404).end('not found');
    return;
  }
  res.writeHead(200, { 'Content-Type': file.endsWith('.html') ? 'text/html' : 'application/octet-stream' });
  res.end(readFileSync(file));
}

const listen = (srv) => new Promise((res) => srv.listen(0, '127.0.0.1', () => res(srv.address().port)));

before(async () => {
  execFileSync('/usr/bin/python3', [new URL('./pkgindex.py', import.meta.url).pathname, indexDir]);
  index = createServer(serveIndex);
  indexPort = await listen(index);
  // Another service on the host's loopback that no sandbox may reach.
  secret = createServer((req, res) => res.end('host secret'));
  secretPort = await listen(secret);
  // An allowed https-style host:port (reached through CONNECT); the proxy does not look inside.
  tunnelTarget = createServer(serveIndex);
  tunnelPort = await listen(tunnelTarget);
  blackhole = spawn('/usr/bin/python3', ['-c', BLACKHOLE], { stdio: ['ignore', 'pipe', 'inherit'] });
  blackholePort = await new Promise((res) => blackhole.stdout.once('data', (d) => res(Number(String(d).trim()))));
});

after(async () => {
  await cleanup();
  await stopHttp();
  index.closeAllConnections();
  index.close();
  secret.close();
  tunnelTarget.closeAllConnections();
  tunnelTarget.close();
  blackhole.kill();
  rmSync(dir, { recursive: true, force: true });
});

let n = 0;
function configFile(extraToml = '') {
  const cfg = join(dir, `config-${++n}.toml`);
  writeFileSync(cfg, `[packages]
index_url = "http://127.0.0.1:${indexPort}/simple"
proxy_allow = ["localhost:${indexPort}", "127.0.0.1:${tunnelPort}", "127.0.0.1:${blackholePort}"]
allowed = ["sbxdemo", "SBXAPP", "sbx_mixed.case", "sbxsrc", "sbxslow", "sbxhuge", "sbxwants", "sbxlong", "sbxshift", "sbxswap"]
${extraToml}
`);
  return cfg;
}

async function server(extraToml = '', logLevel = 'warning') {
  const cfg = configFile(extraToml);
  const { client, transport } = await connect(['--config', cfg, '--state-dir', join(dir, 'state'),
    '--log-level', logLevel]);
  return { client, transport };
}

async function call(client, name, args = {}) {
  const r = await client.callTool({ name, arguments: args }, undefined, { timeout: 120000 });
  const text = (r.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
  return { r, sc: r.structuredContent, text };
}

async function sandbox(client, network) {
  const { sc } = await call(client, 'create_sandbox', { network });
  assert.equal(sc.network, network);
  return sc.sandbox_id;
}

async function py(client, id, code) {
  const { r, sc } = await call(client, 'run_code', { sandbox_id: id, code });
  assert.equal(r.isError, false, JSON.stringify(sc));
  return sc.stdout + (sc.result ?? '');
}

// Raw requests to the proxy from inside the sandbox: the status line and body it answered.
const ASK = `
import socket
def ask(head, port=3128):
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    s.sendall(head.encode())
    data = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        data += d
        if data.startswith(b"HTTP/1.1 200 Connection established\\r\\n\\r\\n"):
            break
    s.close()
    return data.decode("latin-1")

def tunnel(target, inner):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(("CONNECT %s HTTP/1.1\\r\\n\\r\\n" % target).encode())
    data = b""
    while b"\\r\\n\\r\\n" not in data:
        data += s.recv(4096)
    s.sendall(inner.encode())
    while True:
        d = s.recv(65536)
        if not d:
            break
        data += d
    s.close()
    return data.decode("latin-1")
`;

let main;
test('install a package, import it in the same sandbox, and not see it in another', async () => {
  main = await server();
  const c = main.client;
  const a = await sandbox(c, 'packages');
  const inst = await call(c, 'install_packages', { sandbox_id: a, packages: ['sbxapp'] });
  assert.equal(inst.r.isError, false, inst.text);
  assert.deepEqual(inst.sc.installed.map((p) => `${p.name} ${p.version} ${p.requested}`).sort(),
    ['sbxapp 1.0 true', 'sbxdemo 2.0 false']);
  assert.match(inst.text, /sbxapp 1\.0/);
  // the running interpreter imports it at once: no restart, earlier state kept
  await py(c, a, 'kept = 42');
  assert.equal(await py(c, a, 'import sbxapp, sbxdemo\n(kept, sbxapp.READY, sbxdemo.VERSION)'), "(42, True, '2.0')");
  // and so does python3 run by hand in the sandbox
  const cmd = await call(c, 'execute_command', { sandbox_id: a, command: 'python3 -c "import sbxdemo; print(sbxdemo.hello())"' });
  assert.equal(cmd.sc.stdout, 'hello from sbxdemo\n');
  // status and history know
  const st = await call(c, 'get_sandbox_status', { sandbox_id: a });
  assert.deepEqual(st.sc.installed_packages.map((p) => p.name).sort(), ['sbxapp', 'sbxdemo']);
  assert.equal(st.sc.network.mode, 'packages');
  assert.ok(st.sc.network.connections_allowed >= 2, JSON.stringify(st.sc.network));
  const h = await call(c, 'get_execution_history', { sandbox_id: a });
  assert.deepEqual(h.sc.installed_packages.map((p) => p.name).sort(), ['sbxapp', 'sbxdemo']);
  const rec = h.sc.records.find((x) => x.language === 'pip');
  assert.ok(rec && rec.success && /pip install sbxapp/.test(rec.code_preview), JSON.stringify(h.sc.records));
  // pip run by hand installs into the same directory, and the list follows it (it did not);
  // so does a package removed by hand.
  const hand = await call(c, 'execute_command', { sandbox_id: a, command: 'python3 -m pip install -q Sbx-Mixed-Case && rm -r /workspace/.packages/sbxapp /workspace/.packages/sbxapp-1.0.dist-info' });
  assert.equal(hand.r.isError, false, hand.text);
  const names = (list) => list.map((p) => `${p.name} ${p.version}`).sort();
  assert.deepEqual(names((await call(c, 'get_sandbox_status', { sandbox_id: a })).sc.installed_packages), ['Sbx_Mixed.Case 0.1', 'sbxdemo 2.0']);
  assert.deepEqual(names((await call(c, 'get_execution_history', { sandbox_id: a })).sc.installed_packages), ['Sbx_Mixed.Case 0.1', 'sbxdemo 2.0']);
  // another sandbox, of either network, has none of it
  for (const net of ['packages', 'none']) {
    const b = await sandbox(c, net);
    const r = await call(c, 'run_code', { sandbox_id: b, code: 'import sbxdemo' });
    assert.equal(r.r.isError, true);
    assert.equal(r.sc.error.type, 'ModuleNotFoundError');
  }
});

test('a version pin is honoured, and a later install replaces it', async () => {
  const c = main.client;
  const a = await sandbox(c, 'packages');
  let inst = await call(c, 'install_packages', { sandbox_id: a, packages: ['sbxdemo==1.0'] });
  assert.equal(inst.r.isError, false, inst.text);
  assert.deepEqual(inst.sc.installed, [{ name: 'sbxdemo', version: '1.0', requested: true }]);
  assert.equal(await py(c, a, 'import sbxdemo\nsbxdemo.VERSION'), "'1.0'");
  // Upgraded by hand, pip leaves 1.0's dist-info beside 2.0's: the list shows the live one.
  const hand = await call(c, 'execute_command', { sandbox_id: a, command: 'python3 -m pip install -q --upgrade sbxdemo && ls /workspace/.packages' });
  assert.match(hand.sc.stdout, /sbxdemo-1\.0\.dist-info\nsbxdemo-2\.0\.dist-info/);
  assert.deepEqual((await call(c, 'get_sandbox_status', { sandbox_id: a })).sc.installed_packages, [{ name: 'sbxdemo', version: '2.0' }]);
  inst = await call(c, 'install_packages', { sandbox_id: a, packages: ['sbxdemo>1.0', 'Sbx-Mixed-Case'] });
  assert.equal(inst.r.isError, false, inst.text);
  assert.equal(await py(c, a, 'import importlib, sbxdemo, sbx_mixed_case\nimportlib.reload(sbxdemo).VERSION'), "'2.0'");
  const st = await call(c, 'get_sandbox_status', { sandbox_id: a });
  assert.deepEqual(st.sc.installed_packages.map((p) => `${p.name} ${p.version}`).sort(),
    ['Sbx_Mixed.Case 0.1', 'sbxdemo 2.0']);
});

test('packages outside packages.allowed, and smuggled options, are refused before pip runs', async () => {
  const c = main.client;
  const a = await sandbox(c, 'packages');
  const before = requests.length;
  let r = await call(c, 'install_packages', { sandbox_id: a, packages: ['sbxdemo', 'sbxother'] });
  assert.equal(r.r.isError, true);
  assert.match(r.text, /'sbxother' is not on this server's list of installable packages \(packages\.allowed\)/);
  for (const [bad, why] of [
    ['--index-url=http://evil.example/simple', /pip option/],
    ['-e', /pip option/],
    ['-r/etc/passwd', /pip option/],
    ['./sbxdemo', /path/],
    ['/workspace/x.whl', /path/],
    ['http://127.0.0.1/sbxdemo-1.0-py3-none-any.whl', /URL/],
    ['sbxdemo @ http://evil.example/x.whl', /URL/],
    ['sbxdemo; python_version > "3"', /markers/],
    ['sbxdemo==1.0 --pre', /version specifier|unexpected/],
    ['sbxdemo-1.0-py3-none-any.whl', /archive/],
  ]) {
    r = await call(c, 'install_packages', { sandbox_id: a, packages: [bad] });
    assert.equal(r.r.isError, true, bad);
    assert.match(r.text, why, bad);
  }
  assert.equal(requests.length, before, 'pip never ran: ' + requests.slice(before).join(' '));
  let st = await call(c, 'get_sandbox_status', { sandbox_id: a });
  assert.deepEqual(st.sc.installed_packages, []);
  // A project on the list that depends on one that is not: pip resolves first (nothing is
  // installed), and the install is refused naming the dependency. (Before, it came along.)
  r = await call(c, 'install_packages', { sandbox_id: a, packages: ['sbxwants'] });
  assert.equal(r.r.isError, true, r.text);
  assert.match(r.sc.error, /^this install would also bring in sbxother, not on this server's list of installable packages \(packages\.allowed\); nothing was installed$/);
  assert.deepEqual(r.sc.installed, []);
  // A dry run whose report is too large to read whole (a 5 MiB description) cannot be checked:
  // nothing is installed. (Before, the unread report passed as an empty list, and sbxother
  // came along.)
  r = await call(c, 'install_packages', { sandbox_id: a, packages: ['sbxlong'] });
  assert.equal(r.r.isError, true, r.text);
  assert.match(r.sc.error, /^what this install would bring in cannot be checked against packages\.allowed \(pip's report is \d+ bytes, more than the 4 MiB read\); nothing was installed$/);
  assert.deepEqual(r.sc.installed, []);
  const other = await call(c, 'run_code', { sandbox_id: a, code: 'import sbxother' });
  assert.equal(other.sc.error.type, 'ModuleNotFoundError');
  st = await call(c, 'get_sandbox_status', { sandbox_id: a });
  assert.deepEqual(st.sc.installed_packages, []);
  const imp = await call(c, 'run_code', { sandbox_id: a, code: 'import sbxwants' });
  assert.equal(imp.sc.error.type, 'ModuleNotFoundError');
  const h = await call(c, 'get_execution_history', { sandbox_id: a });
  assert.ok(h.sc.records.some((x) => x.language === 'pip' && !x.success && /sbxother/.test(x.error)), JSON.stringify(h.sc.records));
});

// The check resolves once (a dry run) and the install must take exactly what it checked: a
// second resolution meets the index as it is by then. (Before, the install resolved again.)
const served = (project) => pageServed.get(join(indexDir, 'simple', project) + '/') || 0;

test('an index that changes after the check: the install takes the checked releases, not newer ones or their dependencies', async () => {
  const c = main.client;
  const a = await sandbox(c, 'packages');
  pageServed.clear();
  const r = await call(c, 'install_packages', { sandbox_id: a, packages: ['sbxshift'] });
  assert.equal(served('sbxshift'), 2, 'the install read the page as it changed (1.1, which needs sbxother)');
  assert.equal(r.r.isError, false, r.text);
  assert.deepEqual(r.sc.installed.map((p) => `${p.name} ${p.version} ${p.requested}`).sort(),
    ['sbxdemo 2.0 false', 'sbxshift 1.0 true']);
  assert.equal(await py(c, a, 'import sbxshift\nsbxshift.VERSION'), "'1.0'");
  const other = await call(c, 'run_code', { sandbox_id: a, code: 'import sbxother' });
  assert.equal(other.sc.error.type, 'ModuleNotFoundError');
  const st = await call(c, 'get_sandbox_status', { sandbox_id: a });
  assert.deepEqual(st.sc.installed_packages.map((p) => `${p.name} ${p.version}`).sort(),
    ['sbxdemo 2.0', 'sbxshift 1.0']);
});

test('an index that serves another file for the checked release: the install fails on its hash, and nothing is installed', async () => {
  const c = main.client;
  const a = await sandbox(c, 'packages');
  pageServed.clear();
  const r = await call(c, 'install_packages', { sandbox_id: a, packages: ['sbxswap'] });
  assert.equal(served('sbxswap'), 2, 'the install read the page as it changed (another file of 1.0)');
  assert.equal(r.r.isError, true, r.text);
  assert.match(r.sc.error, /^pip failed \(exit code 1\): ERROR: THESE PACKAGES DO NOT MATCH THE HASHES/);
  assert.match(r.sc.error, /the package index now serves a different file than the one that was resolved and checked against packages\.allowed moments before; the install is held to the checked files, so nothing was installed/);
  assert.deepEqual(r.sc.installed, []);
  for (const mod of ['sbxswap', 'sbxother']) {
    const imp = await call(c, 'run_code', { sandbox_id: a, code: `import ${mod}` });
    assert.equal(imp.sc.error.type, 'ModuleNotFoundError', mod);
  }
  const st = await call(c, 'get_sandbox_status', { sandbox_id: a });
  assert.deepEqual(st.sc.installed_packages, []);
  // the pins and reports the server wrote into /tmp are gone
  const tmp = await call(c, 'execute_command', { sandbox_id: a, command: 'ls -A /tmp' });
  assert.doesNotMatch(tmp.sc.stdout, /mcp-pip/);
});

test('wheels only: a project with only an sdist is refused with pip\'s reason, and no setup.py runs', async () => {
  const c = main.client;
  const a = await sandbox(c, 'packages');
  const r = await call(c, 'install_packages', { sandbox_id: a, packages: ['sbxsrc'] });
  assert.equal(r.r.isError, true);
  assert.equal(r.sc.success, false);
  assert.match(r.sc.error, /pip failed \(exit code 1\): ERROR: Could not find a version that satisfies the requirement sbxsrc/);
  assert.match(r.sc.error, /packages\.only_binary is on, so only wheels are installed/);
  assert.match(r.text, /\n\npip's output:\n/);
  assert.ok(!requests.some((u) => u.includes('sbxsrc-1.0.tar.gz')), 'the sdist was never fetched');
  const h = await call(c, 'get_execution_history', { sandbox_id: a });
  assert.ok(h.sc.records.some((x) => x.language === 'pip' && !x.success));
});

test('the proxy lets the index through and refuses other hosts, ports and forbidden addresses', async () => {
  const c = main.client;
  const a = await sandbox(c, 'packages');
  const out = await py(c, a, ASK + `
import json
print(json.dumps({
  "index": ask("GET http://127.0.0.1:${indexPort}/simple/ HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n"),
  "tunnel": tunnel("127.0.0.1:${tunnelPort}", "GET /simple/sbxapp/ HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n"),
  "pipelined": ask("GET http://127.0.0.1:${indexPort}/simple/ HTTP/1.1\\r\\n\\r\\nGET http://127.0.0.1:${indexPort}/second-request HTTP/1.1\\r\\nHost: evil.example\\r\\n\\r\\n"),
  "other_host": ask("GET http://example.invalid/ HTTP/1.1\\r\\nHost: example.invalid\\r\\n\\r\\n"),
  "connect_other_host": ask("CONNECT pypi.org:443 HTTP/1.1\\r\\n\\r\\n"),
  "other_port": ask("CONNECT 127.0.0.1:${secretPort} HTTP/1.1\\r\\n\\r\\n"),
  "other_port_get": ask("GET http://127.0.0.1:${secretPort}/ HTTP/1.1\\r\\n\\r\\n"),
  "name_to_loopback": ask("CONNECT localhost:${indexPort} HTTP/1.1\\r\\n\\r\\n"),
  "connect_plain_http": ask("CONNECT 127.0.0.1:${indexPort} HTTP/1.1\\r\\n\\r\\n"),
  "forward_to_https": ask("GET http://127.0.0.1:${tunnelPort}/simple/ HTTP/1.1\\r\\n\\r\\n"),
  "garbage": ask("\\x16\\x03\\x01 hello"),
  "origin_form": ask("GET /simple/ HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n\\r\\n"),
}))
`);
  const got = JSON.parse(out);
  assert.match(got.index, /^HTTP\/1\.[01] 200/);
  assert.match(got.index, /sbxdemo/);
  assert.match(got.tunnel, /^HTTP\/1\.1 200 Connection established\r\n\r\nHTTP\/1\.1 200 OK/);
  assert.match(got.tunnel, /sbxapp-1\.0-py3-none-any\.whl/);
  // one request per forwarded connection: a second one riding along never reaches anyone
  assert.equal(got.pipelined.match(/HTTP\/1\.1 \d{3}/g).length, 1, got.pipelined);
  assert.ok(!requests.some((u) => u.includes('second-request')));
  for (const k of ['other_host', 'connect_other_host']) {
    assert.match(got[k], /^HTTP\/1\.1 403 Forbidden/, k);
    assert.match(got[k], /refused by the sandbox's network policy \(network: packages\): the host is not on the list/, k);
    assert.match(got[k], new RegExp(`Allowed: http://127\\.0\\.0\\.1:${indexPort}, https://localhost:${indexPort}, https://127\\.0\\.0\\.1:${tunnelPort}, https://127\\.0\\.0\\.1:${blackholePort}\\.`), k);
  }
  for (const k of ['other_port', 'other_port_get']) {
    assert.match(got[k], /^HTTP\/1\.1 403 Forbidden/, k);
    assert.match(got[k], /the port is not allowed for this host/, k);
    assert.doesNotMatch(got[k], /host secret/, k);
  }
  assert.match(got.name_to_loopback, /^HTTP\/1\.1 403 Forbidden/);
  assert.match(got.name_to_loopback, /localhost resolves to a loopback address \(127\.0\.0\.1\)/);
  // a tunnel to a plain-http origin would carry any Host and any number of requests
  assert.match(got.connect_plain_http, /^HTTP\/1\.1 403 Forbidden.*plain http: send the request as an absolute http:\/\/ URL/s);
  assert.match(got.forward_to_https, /^HTTP\/1\.1 403 Forbidden.*is https: reach it through CONNECT/s);
  assert.match(got.garbage, /^HTTP\/1\.1 400 Bad Request/);
  assert.match(got.garbage, /\r\n\r\nmcp-sandbox egress proxy: request: \S/, 'no target is named when none was read');
  assert.match(got.origin_form, /^HTTP\/1\.1 400 .*absolute http:\/\/ URL/s);
  const st = await call(c, 'get_sandbox_status', { sandbox_id: a });
  assert.ok(st.sc.network.connections_denied >= 5, JSON.stringify(st.sc.network));
});

test('sandbox code has no route around the proxy: no host loopback, no raw sockets; network none has no proxy', async () => {
  const c = main.client;
  const a = await sandbox(c, 'packages');
  const probe = (port) => `
import socket, json
def reach(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        return "connected"
    except OSError as e:
        return type(e).__name__
def raw():
    try:
        socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        return "opened"
    except OSError as e:
        return type(e).__name__
print(json.dumps({"proxy": reach(3128), "index": reach(${indexPort}), "secret": reach(${secretPort}), "raw": raw()}))
`;
  const withProxy = JSON.parse(await py(c, a, probe()));
  assert.deepEqual(withProxy, { proxy: 'connected', index: 'ConnectionRefusedError',
    secret: 'ConnectionRefusedError', raw: 'PermissionError' });
  const b = await sandbox(c, 'none');
  const without = JSON.parse(await py(c, b, probe()));
  assert.deepEqual(without, { proxy: 'ConnectionRefusedError', index: 'ConnectionRefusedError',
    secret: 'ConnectionRefusedError', raw: 'PermissionError' });
  const env = await call(c, 'execute_command', { sandbox_id: b, command: 'env | grep -ci proxy || true' });
  assert.equal(env.sc.stdout.trim(), '0');
  const r = await call(c, 'install_packages', { sandbox_id: b, packages: ['sbxdemo'] });
  assert.equal(r.r.isError, true);
  assert.match(r.text, /has no network \(network: none\).*create_sandbox \{"network": "packages"\}/s);
  // the default sandbox follows its profile: none unless configured otherwise
  const d = await call(c, 'install_packages', { packages: ['sbxdemo'] });
  assert.equal(d.r.isError, true);
  assert.match(d.text, /\[profiles\.standard\]/);
});

test('an install that runs too long is stopped; limits on proxy connections, idle time and bytes hold; every decision is logged', async () => {
  const { client: c, transport } = await server(`max_install_seconds = 3
proxy_max_connections = 3
proxy_idle_timeout_s = 2
proxy_max_bytes = "1M"
`, 'info');
  let log = '';
  transport.stderr.on('data', (d) => { log += d.toString(); });
  const a = await sandbox(c, 'packages');
  const t0 = Date.now();
  const r = await call(c, 'install_packages', { sandbox_id: a, packages: ['sbxslow'] });
  assert.equal(r.r.isError, true);
  assert.equal(r.sc.timed_out, true);
  assert.match(r.sc.error, /timed out after 3 s \(packages\.max_install_seconds\)/);
  assert.ok(Date.now() - t0 < 30000);
  assert.equal(await py(c, a, '1 + 1'), '2', 'the sandbox serves the next call');

  const out = JSON.parse(await py(c, a, ASK + `
import json, time
held = [socket.create_connection(("127.0.0.1", 3128), timeout=10) for _ in range(3)]
over = ask("GET http://127.0.0.1:${indexPort}/simple/ HTTP/1.1\\r\\n\\r\\n")
t = time.time()
held[0].settimeout(10)
idle = held[0].recv(4096).decode()
waited = time.time() - t
for s in held:
    s.close()
time.sleep(0.5)
# Past twice the limit the proxy stops taking connections (they wait in the backlog) instead of
# holding more of the server's descriptors; it takes them again as others end.
burst = [socket.create_connection(("127.0.0.1", 3128), timeout=10) for _ in range(8)]
answers = []
for s in burst[3:6]:
    answers.append(s.recv(4096).decode().split("\\r\\n")[0])
burst[6].settimeout(1)
try:
    burst[6].recv(4096)
    waiting = "answered"
except socket.timeout:
    waiting = "waiting"
# The served ones end first, then the refused ones: the 7th is taken once there is room, and
# served, since refusals still lingering do not count against the limit.
for s in burst[:3]:
    s.close()
time.sleep(0.3)
for s in burst[3:6]:
    s.close()
burst[6].settimeout(10)
later = burst[6].recv(4096).decode().split("\\r\\n")[0]
for s in burst[6:]:
    s.close()
time.sleep(0.5)
big = ask("GET http://127.0.0.1:${indexPort}/files/big.bin HTTP/1.1\\r\\n\\r\\n")
after_budget = ask("GET http://127.0.0.1:${indexPort}/simple/ HTTP/1.1\\r\\n\\r\\n")
print(json.dumps({"over": over, "idle": idle, "waited": waited, "big": len(big), "after": after_budget,
                  "answers": answers, "waiting": waiting, "later": later}))
`));
  assert.match(out.over, /^HTTP\/1\.1 429 .*proxy_max_connections = 3/s);
  assert.deepEqual(out.answers, Array(3).fill('HTTP/1.1 429 Too Many Requests'));
  assert.equal(out.waiting, 'waiting', 'the 7th connection waits in the backlog');
  assert.equal(out.later, 'HTTP/1.1 408 Request Timeout', 'and is served once others ended');
  assert.match(out.idle, /^HTTP\/1\.1 408/);
  assert.ok(out.waited > 0.5 && out.waited < 8, `idle close after ${out.waited} s`);
  const slow = JSON.parse(await py(c, a, ASK + `
import json, time
# A head sent a byte at a time has the idle limit from accept, not from each byte.
d = socket.create_connection(("127.0.0.1", 3128), timeout=10)
d.setblocking(False)
t = time.time()
dribbled = None
for ch in "GET http://127.0.0.1:${indexPort}/simple/ HTTP/1.1\\r\\nX-Slow: abcdefghij":
    try:
        dribbled = d.recv(4096).decode().split("\\r\\n")[0]
        break
    except BlockingIOError:
        pass
    d.send(ch.encode())
    time.sleep(0.2)
dribble_s = time.time() - t
d.close()
bare_lf = ask("GET http://127.0.0.1:${indexPort}/simple/ HTTP/1.1\\n\\n")
print(json.dumps({"dribbled": dribbled, "dribble_s": dribble_s, "bare_lf": bare_lf}))
`));
  assert.equal(slow.dribbled, 'HTTP/1.1 408 Request Timeout', 'a dribbled head still times out');
  assert.ok(slow.dribble_s > 1.5 && slow.dribble_s < 4, `the dribbler was cut off after ${slow.dribble_s} s`);
  assert.match(slow.bare_lf, /^HTTP\/1\.1 400 .*line ending/s, 'a bare-LF head is refused at once');
  assert.ok(out.big < 2 * 1024 * 1024, `the byte budget cut the download at ${out.big} bytes`);
  assert.match(out.after, /^HTTP\/1\.1 403 .*byte budget/s);
  // pip hides the proxy's 403 behind "no matching distribution": the result names it.
  const spent = await call(c, 'install_packages', { sandbox_id: a, packages: ['sbxdemo'] });
  assert.equal(spent.r.isError, true);
  assert.match(spent.sc.error, /egress proxy refused \d+ request\(s\), the last with: .*byte budget is used up/);

  await new Promise((res) => setTimeout(res, 300));
  assert.match(log, new RegExp(`"msg":"egress allowed","sandbox":"${a}","method":"GET","target":"127\\.0\\.0\\.1:${indexPort}"`));
  assert.match(log, new RegExp(`"msg":"egress denied","sandbox":"${a}".*"status":"429"`));
  assert.match(log, new RegExp(`"msg":"egress denied","sandbox":"${a}".*"reason":"the sandbox's egress byte budget is used up"`));
});

// A forwarded request whose client leaves before the answer gives its slot back at once (it
// used to hold it until the origin answered or the idle limit passed: 60 s by default).
test('a client that leaves while its forwarded request waits for the origin frees its slot', async () => {
  const { client: c } = await server('proxy_idle_timeout_s = 30\n');
  const a = await sandbox(c, 'packages');
  const open = async () => (await call(c, 'get_sandbox_status', { sandbox_id: a })).sc.network.connections_open;
  await py(c, a, `
import socket, time
held = []
for path in ("/simple/sbxslow/", "/simple/sbxslow/2"):
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(("GET http://127.0.0.1:${indexPort}%s HTTP/1.1\\r\\n\\r\\n" % path).encode())
    held.append(s)
time.sleep(0.5)
`);
  assert.equal(await open(), 2, '(control) both wait for an origin that never answers');
  await py(c, a, 'held[0].close()\nimport time\ntime.sleep(0.5)');
  assert.equal(await open(), 1, 'the one whose client left is gone');
  await py(c, a, 'held[1].close()\ntime.sleep(0.5)');
  assert.equal(await open(), 0);
  await c.close();
});

// The dial has its own limit, however long the idle limit is: a black-holed address is given
// up after proxy_connect_timeout_s (it used to wait for the idle limit, 60 s by default).
test('a connect that hangs is given up after proxy_connect_timeout_s, not the idle limit', async () => {
  const { client: c } = await server('proxy_idle_timeout_s = 30\nproxy_connect_timeout_s = 1\n');
  const a = await sandbox(c, 'packages');
  const got = JSON.parse(await py(c, a, ASK + `
import json, time
t = time.time()
answer = ask("CONNECT 127.0.0.1:${blackholePort} HTTP/1.1\\r\\n\\r\\n")
print(json.dumps({"answer": answer, "took": time.time() - t}))
`));
  assert.match(got.answer, /^HTTP\/1\.1 502 Bad Gateway.*connecting to 127\.0\.0\.1:\d+ timed out/s);
  assert.ok(got.took > 0.8 && got.took < 6, `gave up after ${got.took} s`);
  await c.close();
});

// The dial of all a name's addresses has the one limit: each of three black-holed addresses
// used to get proxy_connect_timeout_s of its own (6 s here), and a name of many such addresses
// held the client that many times as long. The name comes from a hosts file that only this
// server sees (its own mount namespace), so the test needs root: the rootless tier leaves it out.
const BLACKHOLES = `
import socket, sys, time
held, port = [], 0
for ip in sys.argv[1:]:
    s = socket.socket()
    s.bind((ip, port))
    port = s.getsockname()[1]
    s.listen(0)
    held.append(s)
    for _ in range(3):
        c = socket.socket()
        c.setblocking(False)
        try:
            c.connect((ip, port))
        except BlockingIOError:
            pass
        held.append(c)
print(port, flush=True)
time.sleep(3600)
`;
if (process.getuid() === 0) test('the dial of all a name\'s addresses is given up after proxy_connect_timeout_s in all', async () => {
  const ips = ['127.0.0.2', '127.0.0.3', '127.0.0.4'];
  const holes = spawn('/usr/bin/python3', ['-c', BLACKHOLES, ...ips], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const port = await new Promise((res) => holes.stdout.once('data', (d) => res(Number(String(d).trim()))));
    const hosts = join(dir, 'hosts-blackholes');
    writeFileSync(hosts, ips.map((ip) => `${ip} sbx-blackholes.test\n`).join(''));
    const cfg = join(dir, 'config-blackholes.toml');
    writeFileSync(cfg, `[packages]
index_url = "http://127.0.0.1:${indexPort}/simple"
proxy_allow = ["sbx-blackholes.test:${port}"]
private_hosts = ["sbx-blackholes.test"]
proxy_connect_timeout_s = 2
`);
    const prefix = ['unshare', '--mount', '--propagation', 'private', 'sh', '-c',
      'mount --bind "$0" /etc/hosts && exec "$@"', hosts];
    // The control: this namespace's lookup gives all three addresses.
    const seen = execFileSync(prefix[0], [...prefix.slice(1), 'getent', 'ahostsv4', 'sbx-blackholes.test'], { encoding: 'utf8' });
    for (const ip of ips) assert.match(seen, new RegExp(`^${ip.replaceAll('.', '\\.')}\\s+STREAM`, 'm'));
    const { client: c } = await connect(['--config', cfg, '--state-dir', join(dir, 'state')], {}, prefix);
    const a = await sandbox(c, 'packages');
    const got = JSON.parse(await py(c, a, ASK + `
import json, time
t = time.time()
answer = ask("CONNECT sbx-blackholes.test:${port} HTTP/1.1\\r\\n\\r\\n")
print(json.dumps({"answer": answer, "took": time.time() - t}))
`));
    assert.match(got.answer, /^HTTP\/1\.1 502 Bad Gateway.*connecting to sbx-blackholes\.test:\d+ timed out/s);
    assert.ok(got.took > 1.8 && got.took < 4, `gave up after ${got.took} s`);
    await c.close();
  } finally {
    holes.kill();
  }
});

// pip that the memory limit kills is said to be, as a run is: not just "exit code 137".
test('an install that pip loses to the memory limit says so, and the sandbox serves on', async () => {
  const { client: c } = await server('[profiles.standard]\nmemory = "128M"\n');
  const a = await sandbox(c, 'packages');
  const r = await call(c, 'install_packages', { sandbox_id: a, packages: ['sbxhuge'] });
  assert.equal(r.r.isError, true);
  assert.equal(r.sc.timed_out, false);
  // With a cgroup the OOM killer takes pip; rootless without one the limit is an address-space
  // rlimit, and pip gets a MemoryError instead: either way the limit is named.
  const st = await call(c, 'get_sandbox_status', { sandbox_id: a });
  if (st.sc.isolation.limits === 'rlimit') {
    assert.equal(r.sc.oom_killed, false, r.sc.error);
    assert.match(r.sc.error, /^pip ran out of memory \(MemoryError\): the sandbox's memory limit is 128 MiB/);
  } else {
    assert.equal(r.sc.oom_killed, true, r.sc.error);
    assert.match(r.sc.error, /^pip was killed by the OOM killer: the sandbox's memory limit is 128 MiB/);
  }
  assert.equal(await py(c, a, '1 + 1'), '2', 'the sandbox serves the next call');
  const ok = await call(c, 'install_packages', { sandbox_id: a, packages: ['sbxdemo'] });
  assert.equal(ok.sc.oom_killed, false);
  await c.close();
});

test('over Streamable HTTP: install and import, and /metrics counts the proxy\'s decisions', async () => {
  const { url, port } = await startHttp(join(dir, 'state-http'), ['--config', configFile()]);
  const client = new Client({ name: 'e2e-packages-http', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  const a = await sandbox(client, 'packages');
  const inst = await call(client, 'install_packages', { sandbox_id: a, packages: ['sbxdemo==1.0'] });
  assert.equal(inst.r.isError, false, inst.text);
  assert.equal(await py(client, a, 'import sbxdemo\nsbxdemo.VERSION'), "'1.0'");
  const denied = await py(client, a, ASK + 'print(ask("CONNECT evil.example:443 HTTP/1.1\\r\\n\\r\\n").split("\\r\\n")[0])');
  assert.equal(denied.trim(), 'HTTP/1.1 403 Forbidden');
  const m = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const count = (d) => Number((m.match(new RegExp(`^mcp_proxy_connections_total\\{decision="${d}"\\} (\\d+)`, 'm')) || [])[1]);
  assert.ok(count('allowed') >= 2, m);
  assert.ok(count('denied') >= 1, m);
  assert.match(m, /^mcp_package_installs_total\{outcome="ok"\} 1$/m);
  await client.close();
});
