// Streamable HTTP: the real binary on a loopback port, driven by the official SDK's
// StreamableHTTPClientTransport and by raw fetch for the HTTP-level rules.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { BIN, track } from './helpers.mjs';

const dir = mkdtempSync(join(tmpdir(), 'sbx-e2e-http-'));
chmodSync(dir, 0o755);
const servers = [];
after(async () => {
  for (const s of servers) s.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 300));
  rmSync(dir, { recursive: true, force: true });
});

// Starts `serve --http 127.0.0.1:0` and resolves with its port (from the JSON log line).
function start(extra = []) {
  const child = track(spawn(BIN, ['serve', '--http', '127.0.0.1:0', '--state-dir', join(dir, 'state'),
    '--test-fixtures', ...extra], { stdio: ['ignore', 'ignore', 'pipe'] }));
  servers.push(child);
  return new Promise((resolve, reject) => {
    let err = '';
    child.stderr.on('data', (d) => {
      err += d;
      const m = err.match(/"msg":"http listening".*?"port":"(\d+)"/);
      if (m) resolve({ child, port: Number(m[1]), url: `http://127.0.0.1:${m[1]}/mcp` });
    });
    child.on('exit', (code) => reject(new Error(`server exited ${code}: ${err}`)));
  });
}

const JSON_SSE = 'application/json, text/event-stream';
const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };

async function post(url, body, headers = {}, init = {}) {
  return fetch(url, {
    ...init,
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: JSON_SSE, ...headers },
    body: typeof body === 'string' || body instanceof ReadableStream ? body : JSON.stringify(body),
  });
}

// One exchange on a fresh raw connection, for what fetch will not send (a forged Host, repeated
// or malformed framing): everything the server sent until it closed, or until `ms` passed.
function rawHttp(port, text, ms = 3000) {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    let got = '';
    const timer = setTimeout(() => sock.destroy(), ms);
    sock.on('data', (d) => { got += d; });
    sock.on('error', () => {}); // 'close' follows
    sock.on('close', () => { clearTimeout(timer); resolve(got); });
    sock.write(text);
  });
}

async function session(url, headers = {}, capabilities = {}) {
  const r = await post(url, { ...INIT, params: { ...INIT.params, capabilities } }, headers);
  assert.equal(r.status, 200);
  const sid = r.headers.get('mcp-session-id');
  assert.match(sid, /^[0-9a-f]{32}$/);
  await r.text();
  const n = await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, { ...headers, 'Mcp-Session-Id': sid });
  assert.equal(n.status, 202);
  return sid;
}

async function sdkClient(url, token) {
  const opts = token ? { requestInit: { headers: { Authorization: `Bearer ${token}` } } } : {};
  const client = new Client({ name: 'e2e-http', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), opts));
  return client;
}

test('SDK over Streamable HTTP: initialize, tools, run_code with state, progress', async () => {
  const { url } = await start();
  const client = await sdkClient(url);
  const { tools } = await client.listTools();
  assert.ok(tools.some((t) => t.name === 'run_code'));
  let r = await client.callTool({ name: 'run_code', arguments: { code: 'x = 20' } });
  r = await client.callTool({ name: 'run_code', arguments: { code: 'x * 2 + 2' } });
  assert.equal(r.structuredContent.result, '42');
  const seen = [];
  r = await client.callTool({ name: 'run_code', arguments: { code: "import time\nfor i in range(3):\n    print('tick', i, flush=True)\n    time.sleep(0.3)" } },
    undefined, { onprogress: (p) => seen.push(p) });
  assert.equal(r.structuredContent.success, true);
  assert.ok(seen.length >= 2, 'progress streamed over SSE before the response');
  assert.deepEqual(await client.ping(), {});
  const base = url.replace(/\/mcp$/, '');
  let ready;
  for (let i = 0; i < 50 && (ready = await fetch(`${base}/readyz`)).status !== 200; i++) await new Promise((res) => setTimeout(res, 100));
  assert.equal(ready.status, 200, 'ready once the warm pool has a sandbox up');
  const m = await (await fetch(`${base}/metrics`)).text();
  assert.match(m, /mcp_executions_total\{outcome="ok"\} [1-9]/);
  assert.match(m, /# TYPE mcp_execution_seconds histogram/);
  assert.match(m, /mcp_execution_seconds_bucket\{le="\+Inf"\} [1-9]/);
  assert.match(m, /mcp_sandboxes_active 1/);
  assert.match(m, /mcp_pool_ready \d/);
  assert.match(m, /mcp_http_sessions 1/);
  await client.close();
});

test('request headers: 24 KiB of them are served, 40 KiB get 431, and the server goes on', async () => {
  const { url } = await start();
  const fits = await post(url, INIT, { 'X-Pad': 'a'.repeat(24 << 10) });
  assert.equal(fits.status, 200);
  await fits.text();
  const big = await post(url, INIT, { 'X-Pad': 'a'.repeat(40 << 10) });
  assert.equal(big.status, 431);
  await big.text();
  await session(url);
});

test('HTTP rules: 406, 415, 413, 400 without session, 404 unknown, 400 bad version, malformed JSON, 403 foreign Origin and Host', async () => {
  const { url, port } = await start(['--max-message-bytes', '65536']);
  assert.equal((await post(url, INIT, { Accept: 'application/json' })).status, 406);
  assert.equal((await post(url, INIT, { 'Content-Type': 'text/plain' })).status, 415);
  const sid = await session(url);
  assert.equal((await post(url, { jsonrpc: '2.0', id: 2, method: 'ping' })).status, 400);
  assert.equal((await post(url, { jsonrpc: '2.0', id: 2, method: 'ping' }, { 'Mcp-Session-Id': 'f'.repeat(32) })).status, 404);
  assert.equal((await post(url, { jsonrpc: '2.0', id: 2, method: 'ping' }, { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '1999-01-01' })).status, 400);
  // A failed initialize leaves no session (it once did, and returned its id).
  const noParams = await post(url, { jsonrpc: '2.0', id: 1, method: 'initialize' });
  assert.equal(noParams.headers.get('mcp-session-id'), null);
  assert.ok((await noParams.json()).error);
  const bad = await post(url, '{"jsonrpc":', { 'Mcp-Session-Id': sid });
  assert.equal(bad.status, 400);
  assert.equal((await bad.json()).error.code, -32700);
  const ok = await post(url, { jsonrpc: '2.0', id: 3, method: 'ping' }, { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-11-25' });
  assert.equal(ok.status, 200);
  assert.deepEqual((await ok.json()).result, {});
  assert.equal((await post(url, { jsonrpc: '2.0', id: 4, method: 'ping', params: { pad: 'x'.repeat(20 << 20) } }, { 'Mcp-Session-Id': sid })).status, 413);
  // The same without a Content-Length (chunked): the cap is found while the body streams in.
  const piece = new TextEncoder().encode('x'.repeat(1 << 20));
  let sent = 0;
  const chunked = new ReadableStream({
    pull(ctrl) {
      if (sent === 0) ctrl.enqueue(new TextEncoder().encode('{"jsonrpc":"2.0","id":5,"method":"ping","params":{"pad":"'));
      if (sent++ < 20) ctrl.enqueue(piece);
      else { ctrl.enqueue(new TextEncoder().encode('"}}')); ctrl.close(); }
    },
  });
  assert.equal((await post(url, chunked, { 'Mcp-Session-Id': sid }, { duplex: 'half' })).status, 413);
  assert.equal((await post(url, INIT, { Origin: 'http://evil.example' })).status, 403);
  // A Host header naming a foreign site (DNS rebinding) is refused; fetch will not forge Host.
  const raw = await rawHttp(port, 'GET /healthz HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n');
  assert.match(raw, /^HTTP\/1\.1 403/);
  assert.equal((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 200);
  const m = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  assert.match(m, /mcp_http_requests_total\{code="403"\}/);
});

test('DELETE ends the session (and its sandboxes); GET needs text/event-stream', async () => {
  const { url } = await start();
  const sid = await session(url);
  const get = await fetch(url, { headers: { Accept: 'application/json', 'Mcp-Session-Id': sid } });
  assert.equal(get.status, 405);
  const del = await fetch(url, { method: 'DELETE', headers: { 'Mcp-Session-Id': sid } });
  assert.equal(del.status, 200);
  assert.equal((await post(url, { jsonrpc: '2.0', id: 2, method: 'ping' }, { 'Mcp-Session-Id': sid })).status, 404);
});

test('DELETE, or the server\'s end, answers every call still running in the session, on its POST', async () => {
  // Before, a call still parked (under 250 ms) got a 404, and one already streaming got an SSE
  // stream that ended with no answer.
  const { url } = await start();
  const sleeper = (id) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'run_code', arguments: { code: 'import time; time.sleep(30)' } } });
  const ended = /the session was ended \(HTTP DELETE\) while this request ran: it was cancelled/;
  const wait = (ms) => new Promise((r) => setTimeout(r, ms));
  // Parked: the answer is the POST's JSON body.
  let sid = await session(url);
  await post(url, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'run_code', arguments: { code: '1' } } }, { 'Mcp-Session-Id': sid }).then((r) => r.text());
  const parked = post(url, sleeper(3), { 'Mcp-Session-Id': sid });
  await wait(100);
  assert.equal((await fetch(url, { method: 'DELETE', headers: { 'Mcp-Session-Id': sid } })).status, 200);
  let r = await parked;
  assert.equal(r.status, 200);
  assert.equal(r.headers.get('content-type'), 'application/json');
  const body = await r.json();
  assert.equal(body.id, 3);
  assert.equal(body.error.code, -32000);
  assert.match(body.error.message, ended);
  // Streaming: the answer is the stream's last event.
  sid = await session(url);
  r = await post(url, sleeper(4), { 'Mcp-Session-Id': sid });
  assert.equal(r.headers.get('content-type'), 'text/event-stream');
  const text = r.text();
  await wait(300);
  await fetch(url, { method: 'DELETE', headers: { 'Mcp-Session-Id': sid } });
  const events = (await text).split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)));
  assert.equal(events.at(-1).id, 4);
  assert.match(events.at(-1).error.message, ended);
  // A batch (2025-03-26): one answer per request, together.
  const r0 = await post(url, { ...INIT, params: { ...INIT.params, protocolVersion: '2025-03-26' } });
  sid = r0.headers.get('mcp-session-id');
  await r0.text();
  const h = { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-03-26' };
  await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);
  const batch = post(url, [sleeper(5), { ...sleeper(6), params: { name: 'execute_command', arguments: { command: 'sleep 30' } } }], h);
  await wait(100);
  await fetch(url, { method: 'DELETE', headers: h });
  r = await batch;
  const answers = r.headers.get('content-type') === 'application/json' ? await r.json()
    : JSON.parse((await r.text()).split('\n').filter((l) => l.startsWith('data: [')).at(-1).slice(6));
  assert.deepEqual(answers.map((a) => a.id).sort(), [5, 6]);
  for (const a of answers) assert.match(a.error.message, ended);
  // The server's own end (SIGTERM) answers them too, parked or streaming.
  const { child, url: url2, port: port2 } = await start();
  const exited = new Promise((r) => child.on('exit', (code, signal) => r({ code, signal })));
  const sids = [await session(url2), await session(url2)];
  // While those answers go out, nothing new starts: it once took a request in that time, which
  // made a session nobody freed, or aborted the server (a parked request outliving libmicrohttpd).
  // A connection kept alive from before, and a download that is never read (so that the wait
  // for the answers to go out lasts its whole second).
  const big = await post(url2, { jsonrpc: '2.0', id: 20, method: 'tools/call', params: { name: 'run_code', arguments: { code: "open('big.bin', 'wb').write(bytes(64 << 20))" } } }, { 'Mcp-Session-Id': sids[1] });
  const bigAnswer = big.headers.get('content-type') === 'application/json' ? await big.json()
    : JSON.parse((await big.text()).split('\n').filter((l) => l.startsWith('data: {')).at(-1).slice(6));
  const dl = bigAnswer.result.content.find((x) => x.name === 'big.bin')._meta['mcp-sandbox/download'];
  const stalled = net.connect(port2, '127.0.0.1');
  stalled.on('error', () => {});
  stalled.pause();
  stalled.write(`GET ${new URL(dl).pathname}${new URL(dl).search} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
  const kept = net.connect(port2, '127.0.0.1');
  let keptText = '';
  kept.on('data', (d) => { keptText += d; });
  const keptClosed = new Promise((r) => kept.on('close', r));
  kept.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  await wait(300);
  assert.match(keptText, /^HTTP\/1\.1 200/);
  keptText = '';
  const streaming = await post(url2, sleeper(7), { 'Mcp-Session-Id': sids[0] });
  const streamed = streaming.text();
  await wait(300);
  const parked2 = post(url2, sleeper(8), { 'Mcp-Session-Id': sids[1] });
  await wait(100);
  child.kill('SIGTERM');
  await wait(200);
  const init = JSON.stringify(INIT);
  kept.write(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: ${JSON_SSE}\r\nContent-Length: ${init.length}\r\n\r\n${init}`);
  await keptClosed;
  assert.match(keptText, /^HTTP\/1\.1 503[^]*the server is shutting down/);
  const fresh = await new Promise((r) => net.connect(port2, '127.0.0.1').on('connect', () => r('connected')).on('error', (e) => r(e.code)));
  assert.equal(fresh, 'ECONNREFUSED');
  stalled.destroy();
  assert.deepEqual(await exited, { code: 0, signal: null });
  const shutdown = /the server is shutting down: this request was cancelled/;
  const last = (await streamed).split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6))).at(-1);
  assert.equal(last.id, 7);
  assert.match(last.error.message, shutdown);
  const answer = await (await parked2).json();
  assert.equal(answer.id, 8);
  assert.match(answer.error.message, shutdown);
});

test('a tokens file that takes a name of the hash list, or a token another principal has, stops startup naming its line', async () => {
  // sha256("secret"): the hash list's entry is principal token-1.
  const hashes = 'auth_token_hashes = ["sha256:2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"]\n';
  const tokens = join(dir, 'tokens-clash');
  const cfg = join(dir, 'tokens-clash.toml');
  writeFileSync(cfg, `[http]\nauth_tokens_file = "${tokens}"\n${hashes}`);
  writeFileSync(tokens, 'alice:a-token\ntoken-1:other\n');
  await assert.rejects(start(['--config', cfg]), /tokens-clash:2: principal token-1 is the name of an http\.auth_token_hashes entry already/);
  writeFileSync(tokens, 'alice:a-token\nbob:secret\n');
  await assert.rejects(start(['--config', cfg]), /tokens-clash:2: this token is token-1's already/);
  // Distinct names and tokens serve; each token is its own principal.
  writeFileSync(tokens, 'alice:a-token\ntoken-2:b-token\n');
  const { port } = await start(['--config', cfg]);
  for (const [token, status] of [['secret', 200], ['a-token', 200], ['b-token', 200], ['other', 401]]) {
    const r = await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { Authorization: `Bearer ${token}` } });
    assert.equal(r.status, status, token);
    await r.text();
  }
});

test('bearer tokens: 401 without or with a wrong token, never from the query string; principals are isolated', async () => {
  const tokens = join(dir, 'tokens');
  writeFileSync(tokens, 'alice:alice-secret-token\nbob:bob-secret-token\n');
  const cfg = join(dir, 'auth.toml');
  writeFileSync(cfg, `[http]\nauth_tokens_file = "${tokens}"\n`);
  const { url, port } = await start(['--config', cfg]);
  let r = await post(url, INIT);
  assert.equal(r.status, 401);
  assert.match(r.headers.get('www-authenticate'), /^Bearer resource_metadata="http:\/\/127\.0\.0\.1:\d+\/\.well-known\/oauth-protected-resource"/);
  assert.equal((await post(url, INIT, { Authorization: 'Bearer wrong' })).status, 401);
  assert.equal((await post(`${url}?access_token=alice-secret-token`, INIT)).status, 400);
  const meta = await (await fetch(`http://127.0.0.1:${port}/.well-known/oauth-protected-resource`)).json();
  assert.equal(meta.resource, `http://127.0.0.1:${port}/mcp`);
  // The counters need a token (they were open to anyone); health and the API's docs do not.
  const base = `http://127.0.0.1:${port}`;
  assert.equal((await fetch(`${base}/metrics`)).status, 401);
  const counters = await fetch(`${base}/metrics`, { headers: { Authorization: 'Bearer alice-secret-token' } });
  assert.equal(counters.status, 200);
  assert.match(await counters.text(), /mcp_http_requests_total/);
  for (const open of ['/healthz', '/docs', '/api/v1/openapi.json']) assert.equal((await fetch(base + open)).status, 200, open);
  const alice = await sdkClient(url, 'alice-secret-token');
  const bob = await sdkClient(url, 'bob-secret-token');
  const created = await alice.callTool({ name: 'create_sandbox', arguments: { name: 'a' } });
  const id = created.structuredContent.sandbox_id;
  const mine = await alice.callTool({ name: 'run_code', arguments: { sandbox_id: id, code: '6*7' } });
  assert.equal(mine.structuredContent.result, '42');
  const theirs = await bob.callTool({ name: 'run_code', arguments: { sandbox_id: id, code: '6*7' } });
  assert.equal(theirs.isError, true);
  assert.match(theirs.content[0].text, /unknown sandbox_id/);
  // Another session of the same principal shares its sandboxes.
  const alice2 = await sdkClient(url, 'alice-secret-token');
  const again = await alice2.callTool({ name: 'run_code', arguments: { sandbox_id: id, code: '1+1' } });
  assert.equal(again.structuredContent.result, '2');
  // Bob cannot use Alice's session id either.
  // Anyone may subscribe to any uri, but only the owner's sessions hear of its changes.
  const { ResourceUpdatedNotificationSchema } = await import('@modelcontextprotocol/sdk/types.js');
  const heard = { alice: [], bob: [] };
  alice2.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => heard.alice.push(n.params.uri));
  bob.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => heard.bob.push(n.params.uri));
  const watched = `sandbox://${id}/files/watched.txt`;
  await alice2.subscribeResource({ uri: watched });
  await bob.subscribeResource({ uri: watched });
  await alice.callTool({ name: 'run_code', arguments: { sandbox_id: id, code: "open('watched.txt', 'w').write('v1')" } });
  for (let i = 0; i < 50 && heard.alice.length === 0; i++) await new Promise((r) => setTimeout(r, 100));
  await new Promise((r) => setTimeout(r, 200));
  assert.deepEqual(heard.alice, [watched], 'the owner hears of the change');
  assert.deepEqual(heard.bob, [], 'another principal hears nothing of this sandbox');
  const sid = await session(url, { Authorization: 'Bearer alice-secret-token' });
  assert.equal((await post(url, { jsonrpc: '2.0', id: 9, method: 'ping' }, { Authorization: 'Bearer bob-secret-token', 'Mcp-Session-Id': sid })).status, 404);
  await alice.close();
  await alice2.close();
  await bob.close();
});

test('a sandbox the server closed on idle_ttl_s says why to its owner, and is unknown to others', async () => {
  const tokens = join(dir, 'tokens-ttl');
  writeFileSync(tokens, 'alice:alice-secret-token\nbob:bob-secret-token\n');
  const cfg = join(dir, 'ttl.toml');
  writeFileSync(cfg, `[http]\nauth_tokens_file = "${tokens}"\n[limits]\nidle_ttl_s = 1\n`);
  const { url } = await start(['--config', cfg]);
  const alice = await sdkClient(url, 'alice-secret-token');
  const bob = await sdkClient(url, 'bob-secret-token');
  const id = (await alice.callTool({ name: 'create_sandbox', arguments: {} })).structuredContent.sandbox_id;
  await new Promise((r) => setTimeout(r, 2500));
  const mine = await alice.callTool({ name: 'run_code', arguments: { sandbox_id: id, code: '1' } });
  assert.match(mine.content[0].text, /is gone: .*limits\.idle_ttl_s = 1/);
  const theirs = await bob.callTool({ name: 'run_code', arguments: { sandbox_id: id, code: '1' } });
  assert.match(theirs.content[0].text, /unknown sandbox_id/);
  await alice.close();
  await bob.close();
});

test('downloads count as use of a sandbox for limits.idle_ttl_s', async () => {
  const cfg = join(dir, 'ttl-dl.toml');
  writeFileSync(cfg, '[limits]\nidle_ttl_s = 2\n');
  const { port } = await start(['--config', cfg]);
  const base = `http://127.0.0.1:${port}`;
  const r = await fetch(`${base}/api/v1/tools/run_code`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ code: "open('d.txt', 'w').write('kept')" }) });
  const sid = (await r.json()).structuredContent.sandbox_id;
  // Past twice the TTL, with nothing but downloads meanwhile.
  for (let i = 0; i < 8; i++) {
    await new Promise((res) => setTimeout(res, 600));
    const d = await fetch(`${base}/files/${sid}/d.txt`);
    assert.equal(d.status, 200, `download ${i} after ${(i + 1) * 0.6} s`);
    assert.equal(await d.text(), 'kept');
  }
});

test('one principal cannot take every session: http.max_sessions_per_principal', async () => {
  const tokens = join(dir, 'tokens-cap');
  writeFileSync(tokens, 'alice:alice-secret-token\nbob:bob-secret-token\n');
  const cfg = join(dir, 'cap.toml');
  writeFileSync(cfg, `[http]\nauth_tokens_file = "${tokens}"\nmax_sessions = 10\nmax_sessions_per_principal = 3\n`);
  const { url } = await start(['--config', cfg]);
  const alice = { Authorization: 'Bearer alice-secret-token' };
  for (let i = 0; i < 3; i++)
    await session(url, alice);
  const r = await post(url, INIT, alice);
  assert.equal(r.status, 503);
  assert.match((await r.json()).error.message, /max_sessions_per_principal/);
  // Before, alice's sessions counted against everyone's max_sessions alone.
  await session(url, { Authorization: 'Bearer bob-secret-token' });
});

test('at http.max_sessions, the session unused the longest makes room, not one in use or holding sandboxes', async () => {
  // Before, sessions their clients left without a DELETE (most do) held every place for
  // http.session_idle_s, an hour, and each new client got 503.
  const cfg = join(dir, 'evict.toml');
  writeFileSync(cfg, '[http]\nmax_sessions = 4\nsession_evict_idle_s = 1\n');
  const { url } = await start(['--config', cfg]);
  const h = (sid) => ({ 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-11-25' });
  // Made first, so the oldest: ending it would close its sandbox, and it stays.
  const holding = await session(url);
  const made = await post(url, { jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'create_sandbox', arguments: {} } }, h(holding));
  // A call that runs past 250 ms is answered as an SSE stream.
  const answerOf = async (r, id) => (r.headers.get('content-type').includes('json') ? r.json()
    : (await readEvents(r, (ev) => ev.msg.id === id)).pop().msg);
  const sandboxId = (await answerOf(made, 9)).result.structuredContent.sandbox_id;
  const left = await session(url);
  const streaming = await session(url);
  const get = await fetch(url, { headers: { ...h(streaming), Accept: 'text/event-stream' } });
  assert.equal(get.status, 200);
  const calling = await session(url);
  const slow = post(url, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'test_slow', arguments: { ms: 4000 } } }, h(calling));
  await new Promise((res) => setTimeout(res, 1500));
  // All three idle past 1 s by their last request; only the one nobody uses goes.
  const fresh = await session(url);
  const gone = await post(url, { jsonrpc: '2.0', id: 3, method: 'ping' }, h(left));
  assert.equal(gone.status, 404);
  await gone.text();
  const ping = await post(url, { jsonrpc: '2.0', id: 4, method: 'ping' }, h(fresh));
  assert.deepEqual((await ping.json()).result, {});
  // Now every session is in use, holds a sandbox, or was used within the second: the next one
  // is refused.
  const full = await post(url, INIT);
  assert.equal(full.status, 503);
  assert.match((await full.json()).error.message, /max_sessions/);
  const kept = await post(url, { jsonrpc: '2.0', id: 10, method: 'tools/call', params: { name: 'get_sandbox_status', arguments: { sandbox_id: sandboxId } } }, h(holding));
  assert.equal((await answerOf(kept, 10)).result.structuredContent.state, 'ready');
  await get.body.cancel();
  const done = await slow;
  assert.equal(done.status, 200);
  await done.text();
});

test('one principal cannot hold every connection: http.max_open_requests_per_principal', async () => {
  // Before, calls still running took connections until none was left, and another principal's
  // initialize waited unserved, not even refused.
  const tokens = join(dir, 'tokens-open');
  writeFileSync(tokens, 'alice:alice-secret-token\nbob:bob-secret-token\n');
  const cfg = join(dir, 'open.toml');
  writeFileSync(cfg, `[http]\nauth_tokens_file = "${tokens}"\nmax_open_requests_per_principal = 2\n`);
  const { port, url } = await start(['--config', cfg]);
  const alice = { Authorization: 'Bearer alice-secret-token' };
  const sid = await session(url, alice);
  const mine = { ...alice, 'Mcp-Session-Id': sid };
  const sleeper = (id) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'run_code', arguments: { code: 'import time; time.sleep(4)' } } });
  const held = [post(url, sleeper(2), mine), post(url, sleeper(3), mine)];
  await new Promise((r) => setTimeout(r, 1000));
  const ping = (id) => ({ jsonrpc: '2.0', id, method: 'ping' });
  // Two held: a third request of alice's is refused, on MCP, as an event stream and on REST.
  let r = await post(url, ping(4), mine);
  assert.equal(r.status, 429);
  assert.match((await r.json()).error.message, /max_open_requests_per_principal/);
  r = await fetch(url, { headers: { ...mine, Accept: 'text/event-stream' } });
  assert.equal(r.status, 429);
  await r.text();
  r = await fetch(`http://127.0.0.1:${port}/api/v1/tools/list_sandboxes`, { method: 'POST', headers: alice });
  assert.equal(r.status, 429);
  await r.text();
  // A notification holds no connection: still taken.
  r = await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, mine);
  assert.equal(r.status, 202);
  // Bob is served meanwhile.
  const bob = { Authorization: 'Bearer bob-secret-token' };
  const bsid = await session(url, bob);
  r = await post(url, ping(5), { ...bob, 'Mcp-Session-Id': bsid });
  assert.equal(r.status, 200);
  await r.text();
  // Once alice's calls have ended, she is served again.
  for (const h of held) {
    const done = await h;
    assert.equal(done.status, 200);
    await done.text();
  }
  r = await post(url, ping(6), mine);
  assert.equal(r.status, 200);
  await r.text();
});

test('request bodies held at once stay under http.max_body_bytes_total; one alone always fits', async () => {
  // Before, each connection could hold http.max_body_bytes, so 1,024 slow uploads at once could
  // take 16 GiB of the server's memory.
  const cfg = join(dir, 'bodies.toml');
  writeFileSync(cfg, '[http]\nmax_body_bytes_total = 65536\n');
  const { port, url } = await start(['--config', cfg]);
  // One upload, held half-sent: 50,000 of its 60,000 bytes.
  const slow = net.connect(port, '127.0.0.1');
  await new Promise((r) => slow.on('connect', r));
  slow.write(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 60000\r\n\r\n`);
  slow.write(' '.repeat(50000));
  await new Promise((r) => setTimeout(r, 500));
  const padded = { ...INIT, params: { ...INIT.params, clientInfo: { name: 'x'.repeat(30000), version: '1' } } };
  let r = await post(url, padded);
  assert.equal(r.status, 503);
  assert.match((await r.json()).error.message, /max_body_bytes_total/);
  // A request without a body is still served.
  r = await fetch(`http://127.0.0.1:${port}/healthz`);
  assert.equal(r.status, 200);
  await r.text();
  // Once the first upload has gone, the same body is taken.
  slow.destroy();
  await new Promise((r) => setTimeout(r, 300));
  r = await post(url, padded);
  assert.equal(r.status, 200);
  await r.text();
  // And one body alone fits whatever the total: 100,000 bytes with none other held.
  r = await post(url, { ...INIT, params: { ...INIT.params, clientInfo: { name: 'y'.repeat(100000), version: '1' } } });
  assert.equal(r.status, 200);
  await r.text();
});

test('a principal\'s REST session expires when idle: it does not hold a slot of http.max_sessions for ever', async () => {
  const tokens = join(dir, 'tokens-rest-idle');
  writeFileSync(tokens, 'alice:alice-secret-token\nbob:bob-secret-token\n');
  const cfg = join(dir, 'rest-idle.toml');
  writeFileSync(cfg, `[http]\nauth_tokens_file = "${tokens}"\nmax_sessions = 1\nsession_idle_s = 1\n`);
  const { port, url } = await start(['--config', cfg]);
  const r = await fetch(`http://127.0.0.1:${port}/api/v1/tools/list_sandboxes`, {
    method: 'POST', headers: { Authorization: 'Bearer alice-secret-token' } });
  assert.equal(r.status, 200);
  await r.text();
  // Alice's hidden REST session took the one slot; idle, it ends like any other session.
  const bob = { Authorization: 'Bearer bob-secret-token' };
  const t0 = Date.now();
  for (;;) {
    const init = await post(url, INIT, bob);
    await init.text();
    if (init.status === 200) break;
    assert.equal(init.status, 503);
    assert.ok(Date.now() - t0 < 30000, 'an idle REST session held its session slot for ever');
    await new Promise((res) => setTimeout(res, 500));
  }
});

test('the API description, served without a token, takes no session slot from the principals', async () => {
  // Before, /docs and /api/v1/openapi.json listed the tools through a hidden session that stayed
  // for http.session_idle_s: a client without a token held a slot of http.max_sessions.
  const tokens = join(dir, 'tokens-docs');
  writeFileSync(tokens, 'alice:alice-secret-token\n');
  const cfg = join(dir, 'docs-slot.toml');
  writeFileSync(cfg, `[http]\nauth_tokens_file = "${tokens}"\nmax_sessions = 1\n`);
  const { port, url } = await start(['--config', cfg]);
  for (const path of ['/docs', '/api/v1/openapi.json']) {
    const r = await fetch(`http://127.0.0.1:${port}${path}`);
    assert.equal(r.status, 200);
    assert.match(await r.text(), /run_code/);
  }
  await session(url, { Authorization: 'Bearer alice-secret-token' });
});

test('a non-loopback address without tokens is refused at startup', async () => {
  await assert.rejects(new Promise((resolve, reject) => {
    const child = track(spawn(BIN, ['serve', '--http', '0.0.0.0:0', '--state-dir', join(dir, 'state')], { stdio: ['ignore', 'ignore', 'pipe'] }));
    let err = '';
    child.stderr.on('data', (d) => { err += d; });
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(err))));
  }), /no tokens are configured/);
});

test('a bare --http listens at http.listen from the configuration', async () => {
  const cfg = join(dir, 'listen.toml');
  writeFileSync(cfg, '[http]\nlisten = "127.0.0.1:0"\n');
  const child = track(spawn(BIN, ['serve', '--http', '--config', cfg, '--state-dir', join(dir, 'state')],
    { stdio: ['ignore', 'ignore', 'pipe'] }));
  servers.push(child);
  const port = await new Promise((resolve, reject) => {
    let err = '';
    child.stderr.on('data', (d) => {
      err += d;
      const m = err.match(/"msg":"http listening","address":"127\.0\.0\.1","port":"(\d+)"/);
      if (m) resolve(Number(m[1]));
    });
    child.on('exit', (code) => reject(new Error(`server exited ${code}: ${err}`)));
  });
  const r = await post(`http://127.0.0.1:${port}/mcp`, INIT);
  assert.equal(r.status, 200);
  await r.text();
  // The key is held to the same rule as the flag: a wildcard without tokens is refused.
  writeFileSync(cfg, '[http]\nlisten = "0.0.0.0:0"\n');
  await assert.rejects(new Promise((resolve, reject) => {
    const c = track(spawn(BIN, ['serve', '--http', '--config', cfg, '--state-dir', join(dir, 'state')], { stdio: ['ignore', 'ignore', 'pipe'] }));
    let err = '';
    c.stderr.on('data', (d) => { err += d; });
    c.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(err))));
  }), /no tokens are configured/);
});

test('a slowloris client and 1,000 dropped connections do not stop others', async () => {
  const { url, port } = await start();
  const slow = net.connect(port, '127.0.0.1');
  slow.write('POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n');
  const dribble = setInterval(() => slow.write('X'), 100);
  for (let i = 0; i < 1000; i += 100) {
    await Promise.all(Array.from({ length: 100 }, () => new Promise((res) => {
      const s = net.connect(port, '127.0.0.1', () => { s.destroy(); res(); });
      s.on('error', res);
    })));
  }
  const t0 = Date.now();
  const client = await sdkClient(url);
  assert.deepEqual(await client.ping(), {});
  assert.ok(Date.now() - t0 < 5000);
  clearInterval(dribble);
  slow.destroy();
  await client.close();
});

test('a request dribbled in past http.request_timeout_s is cut; a steady one is not', async () => {
  const cfg = join(dir, 'deadline.toml');
  writeFileSync(cfg, '[http]\nrequest_timeout_s = 1\n');
  const { url, port } = await start(['--config', cfg]);
  // Headers a byte at a time: idle never, done never. libmicrohttpd's timeout alone let such a
  // connection live for ever, and a thousand of them took the server.
  const slow = net.connect(port, '127.0.0.1');
  const ended = new Promise((res) => slow.on('close', res));
  slow.on('error', () => {});
  slow.write('POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n');
  const dribble = setInterval(() => slow.write('X'), 200);
  const t0 = Date.now();
  await ended;
  clearInterval(dribble);
  assert.ok(Date.now() - t0 < 9000, `cut after ${Date.now() - t0} ms`);
  // A call that takes longer than the deadline once its request is in is not cut.
  const sid = await session(url);
  const r = await post(url, { jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'test_slow', arguments: { ms: 2500 } } }, { 'Mcp-Session-Id': sid });
  assert.match(await r.text(), /"id":9,"result"/);
});

test('a cancelled call ends its POST; an id that cannot be answered is a 400, not a hang', async () => {
  const { url } = await start();
  const sid = await session(url);
  const h = { 'Mcp-Session-Id': sid };
  const call = post(url, { jsonrpc: '2.0', id: 'call1', method: 'tools/call', params: { name: 'test_slow', arguments: { ms: 20000 } } }, h);
  await new Promise((res) => setTimeout(res, 500));
  const n = await post(url, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'call1' } }, h);
  assert.equal(n.status, 202);
  const t0 = Date.now();
  const r = await call;
  const body = await r.text();
  assert.ok(Date.now() - t0 < 5000, `the POST ended ${Date.now() - t0} ms after the cancel`);
  assert.doesNotMatch(body, /"result"/);
  // A client's error response with id null (it could not read a message) is taken: 202.
  for (const msg of [{ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'x' } }, { jsonrpc: '2.0', error: { code: -32600, message: 'y' } }]) {
    assert.equal((await post(url, msg, h)).status, 202, JSON.stringify(msg));
  }
  for (const [msg, why] of [
    [{ jsonrpc: '2.0', id: { a: 1 }, method: 'ping' }, /id must be a string or an integer/],
    [{ jsonrpc: '2.0', id: 1.5, method: 'ping' }, /id must be a string or an integer/],
    [{ jsonrpc: '2.0', id: 7, method: 5 }, /method must be a string/],
    [{ jsonrpc: '2.0', id: 8 }, /needs a method/],
    [[{ jsonrpc: '2.0', id: 2, method: 'ping' }], /batches/],
    [{ jsonrpc: '2.0', id: null, result: {} }, /id must be/],
    [42, /must be an object/],
  ]) {
    const bad = await post(url, msg, h, { signal: AbortSignal.timeout(5000) });
    assert.equal(bad.status, 400, JSON.stringify(msg));
    const e = (await bad.json()).error;
    assert.equal(e.code, -32600);
    assert.match(e.message, why);
  }
});

test('a 2025-03-26 session posts batches: one JSON array, or an SSE stream ending with it', async () => {
  const { url } = await start();
  const r0 = await post(url, { ...INIT, params: { ...INIT.params, protocolVersion: '2025-03-26' } });
  const sid = r0.headers.get('mcp-session-id');
  await r0.text();
  const h = { 'Mcp-Session-Id': sid };
  assert.equal((await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h)).status, 202);
  // Quick: one JSON body holding every answer.
  let r = await post(url, [{ jsonrpc: '2.0', id: 2, method: 'ping' }, { jsonrpc: '2.0', method: 'notifications/x' },
    { jsonrpc: '2.0', id: 'q', method: 'tools/call', params: { name: 'test_slow', arguments: { ms: 10 } } }], h);
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /application\/json/);
  const quick = await r.json();
  assert.deepEqual(quick.map((m) => m.id).sort(), [2, 'q'].sort());
  // Slow: an SSE stream with the progress, ending with the array.
  r = await post(url, [{ jsonrpc: '2.0', id: 3, method: 'ping' },
    { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'test_slow', arguments: { ms: 800, steps: 2 }, _meta: { progressToken: 't' } } }], h);
  assert.match(r.headers.get('content-type'), /text\/event-stream/);
  const events = await readEvents(r, (ev) => Array.isArray(ev.msg));
  const last = events[events.length - 1].msg;
  assert.deepEqual(last.map((m) => m.id), [3, 4]);
  assert.equal(last[1].result.content[0].text, 'done');
  assert.ok(events.some((ev) => ev.msg.method === 'notifications/progress' && ev.msg.params.progressToken === 't'));
  // Only notifications: 202. Every request cancelled: the POST ends with no answer.
  assert.equal((await post(url, [{ jsonrpc: '2.0', method: 'notifications/x' }], h)).status, 202);
  const gone = post(url, [{ jsonrpc: '2.0', id: 'c', method: 'tools/call', params: { name: 'test_slow', arguments: { ms: 20000 } } }], h);
  await new Promise((res) => setTimeout(res, 500));
  await post(url, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'c' } }, h);
  const t0 = Date.now();
  const body = await (await gone).text();
  assert.ok(Date.now() - t0 < 5000);
  assert.doesNotMatch(body, /"result"/);
  // Refused whole: a batch with no request to answer on.
  for (const [msg, why] of [[[], /empty batch/],
    [[{ jsonrpc: '2.0', method: 'notifications/initialized' }, 5], /must be an object/]]) {
    const bad = await post(url, msg, h);
    assert.equal(bad.status, 400, JSON.stringify(msg));
    assert.match((await bad.json()).error.message, why);
  }
  // One with a request is answered member by member, as over stdio: an invalid member is an
  // error in the array, and the requests beside it are answered (before, the whole batch was
  // a 400 and they never were).
  for (const [msg, want] of [
    [[INIT], [[1, /initialize must not be part of a batch/]]],
    [[{ jsonrpc: '2.0', id: 5, method: 'ping' }, { jsonrpc: '2.0', id: 1.5, method: 'ping' }], [[5, null], [null, /id must be/]]],
    [[{ jsonrpc: '2.0', id: 6, method: 'ping' }, 5], [[6, null], [null, /must be an object/]]],
  ]) {
    const r = await post(url, msg, h);
    assert.equal(r.status, 200, JSON.stringify(msg));
    const got = await r.json();
    assert.equal(got.length, want.length, JSON.stringify(got));
    for (const [i, [id, err]] of want.entries()) {
      assert.equal(got[i].id, id, JSON.stringify(got));
      if (err) assert.match(got[i].error.message, err);
      else assert.deepEqual(got[i].result, {});
    }
  }
});

test('two open POSTs of one session never share an id: answers find their POST by it', async () => {
  const { url } = await start();
  const r0 = await post(url, { ...INIT, params: { ...INIT.params, protocolVersion: '2025-03-26' } });
  const h = { 'Mcp-Session-Id': r0.headers.get('mcp-session-id') };
  await r0.text();
  const slow = (id, ms) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'test_slow', arguments: { ms } } });
  const ping = (id) => ({ jsonrpc: '2.0', id, method: 'ping' });
  const answer = async (r) => (r.headers.get('content-type').includes('json') ? r.json()
    : (await readEvents(r, (ev) => ev.msg.id !== undefined || Array.isArray(ev.msg))).pop().msg);
  // A batch whose first id is a running POST's: before, each POST got the other's answer.
  const single = post(url, slow(50, 600), h);
  await new Promise((res) => setTimeout(res, 100));
  let r = await post(url, [ping(50), ping(51)], h);
  assert.equal(r.status, 400);
  assert.match((await r.json()).error.message, /still open on this session/);
  let got = await answer(await single);
  assert.equal(got.id, 50);
  assert.equal(got.result.content[0].text, 'done');
  // A batch still waiting for its second request, and a POST with the batch's first id.
  const batch = post(url, [ping(60), slow(61, 600)], h);
  await new Promise((res) => setTimeout(res, 100));
  r = await post(url, ping(60), h);
  assert.equal(r.status, 400);
  await r.text();
  got = await answer(await batch);
  assert.deepEqual(got.map((m) => m.id), [60, 61]);
  // Once answered, the id is free again.
  r = await post(url, ping(60), h);
  assert.equal(r.status, 200);
  assert.deepEqual(await r.json(), { jsonrpc: '2.0', id: 60, result: {} });
});

test('an idle SSE stream gets keep-alive comments; a client that left is found and its session expires', async () => {
  const cfg = join(dir, 'keepalive.toml');
  writeFileSync(cfg, '[http]\nkeepalive_s = 1\nsession_idle_s = 1\n');
  const { url, port } = await start(['--config', cfg]);
  const sessions = async () => Number((await (await fetch(`http://127.0.0.1:${port}/metrics`)).text())
    .match(/^mcp_http_sessions (\d+)/m)[1]);
  const sid = await session(url);
  // The standalone GET stream, read raw; then the client vanishes without a DELETE, as an SDK
  // client that is closed without terminateSession does.
  const sock = net.connect(port, '127.0.0.1');
  sock.write(`GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAccept: text/event-stream\r\nMcp-Session-Id: ${sid}\r\n\r\n`);
  let got = '';
  const comment = new Promise((res) => sock.on('data', (d) => { got += d; if (/\r\n:\n\n|\n:\n\n/.test(got)) res(); }));
  await Promise.race([comment, new Promise((_, rej) => setTimeout(() => rej(new Error(`no keep-alive: ${got}`)), 12000))]);
  assert.equal(await sessions(), 1);
  sock.destroy();
  // Parked with nothing to send, the stream was polled by nobody: the session lived for ever.
  const t0 = Date.now();
  while (await sessions() !== 0) {
    assert.ok(Date.now() - t0 < 30000, 'the session of a client that left never expired');
    await new Promise((res) => setTimeout(res, 500));
  }
});

test('a response over a size cap, unparsable, or with neither result nor error, fails the request it answers (413 or 400 to its POST), rather than leaving its tool waiting', async () => {
  const cfg = join(dir, 'small-bodies.toml');
  writeFileSync(cfg, '[server]\nmax_message_bytes = 1024\n[http]\nmax_body_bytes = 4096\n');
  const { url } = await start(['--config', cfg]);
  const sid = await session(url, {}, { sampling: {} });
  // Each round: a tool asks for sampling on its POST's stream; the client's answer is refused.
  const round = async (id, answer, status, reason) => {
    const { h, events, ask } = await samplingAsked(url, sid, id);
    const r = await post(url, answer(ask.id), h);
    assert.equal(r.status, status);
    await r.text();
    let timer;
    const done = await Promise.race([events.next(), new Promise((res) => { timer = setTimeout(() => res({ value: 'still waiting' }), 5000); })]);
    clearTimeout(timer);
    assert.equal(done.value.id, id, JSON.stringify(done.value));
    assert.equal(done.value.result.isError, true);
    assert.match(done.value.result.content[0].text, reason);
    await events.return();
  };
  const result = (text) => ({ role: 'assistant', content: { type: 'text', text }, model: 'm' });
  // Over max_message_bytes: the body is kept, and parsed for nothing.
  await round(2, (id) => ({ jsonrpc: '2.0', id, result: result('x'.repeat(2000)) }), 413, /exceeds the size limit \(\d+ bytes, limit 1024\)/);
  // Over http.max_body_bytes: the body is not kept; its two ends name the request.
  await round(3, (id) => ({ jsonrpc: '2.0', id, result: result('x'.repeat(8000)) }), 413, /exceeds the size limit \(\d+ bytes, limit 4096\)/);
  // Not JSON.
  await round(4, (id) => `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":{"model":"m",}}`, 400, /could not be read: /);
  // Neither a result nor an error: a 400, and the request fails (it waited for ever before).
  await round(6, (id) => ({ jsonrpc: '2.0', id }), 400, /has neither a result nor an error/);
  // Without "jsonrpc": "2.0": taken as the answer that fails it.
  await round(7, (id) => ({ id, result: result('x') }), 202, /lacks "jsonrpc": "2.0"/);
  // A client that answers in the size the server takes is heard as ever.
  await samplingAnswered(url, await samplingAsked(url, sid, 5), 5);
});

test('a request the strict parse refuses is not taken for an answer, even under the id of a pending server request', async () => {
  const { url } = await start();
  const asked = await samplingAsked(url, await session(url, {}, { sampling: {} }));
  // Valid JSON, a request (it has a method), refused for its key given twice; its id is the
  // client's own, which may be any string, here the one the server chose for its request.
  const r = await post(url, `{"jsonrpc":"2.0","id":${JSON.stringify(asked.ask.id)},"method":"ping","params":{},"params":{}}`, asked.h);
  assert.equal(r.status, 400);
  await r.text();
  await samplingAnswered(url, asked, 2);
});

test('a tool call cancelled while it waits on sampling has the sampling request cancelled on its stream', async () => {
  const { url } = await start();
  const { h, events, ask } = await samplingAsked(url, await session(url, {}, { sampling: {} }));
  assert.equal((await post(url, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 2 } }, h)).status, 202);
  const rest = [];
  for await (const m of events) rest.push(m);
  assert.deepEqual(rest, [{ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: ask.id, reason: 'the tool call that asked was cancelled' } }]);
});

test('a batch holding a call and its own cancel, and a tool that notifies before it answers, leave the server up', async () => {
  // Both freed the POST's stream while its handler still held it (a crash under ASan).
  const { child, url } = await start();
  const r0 = await post(url, { ...INIT, params: { ...INIT.params, protocolVersion: '2025-03-26' } });
  const sid = r0.headers.get('mcp-session-id');
  await r0.text();
  const h = { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-03-26' };
  assert.equal((await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h)).status, 202);
  let r = await post(url, [
    { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'run_code', arguments: { code: 'import time; time.sleep(2)' } } },
    { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } }], h);
  assert.equal(r.status, 200);
  await r.text();
  r = await post(url, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'test_log', arguments: {} } }, h);
  assert.match(await r.text(), /"id":2,"result"/);
  r = await post(url, { jsonrpc: '2.0', id: 3, method: 'ping' }, h);
  assert.deepEqual((await r.json()).result, {});
  assert.equal(child.exitCode, null);
});

test('over max_message_bytes is a 413 on /mcp and REST; a tool name that is not UTF-8 a 404; a legacy session is unknown to /mcp', async () => {
  const { child, url, port } = await start(['--max-message-bytes', '4k']);
  const sid = await session(url);
  const big = { jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'run_code', arguments: { code: '#' + 'x'.repeat(5000) } } };
  let r = await post(url, big, { 'Mcp-Session-Id': sid });
  assert.equal(r.status, 413);
  assert.match((await r.json()).error.message, /exceeds the limit of 4096/);
  const rest = (name, body) => fetch(`http://127.0.0.1:${port}/api/v1/tools/${name}`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
  r = await rest('run_code', JSON.stringify({ code: '#' + 'x'.repeat(5000) }));
  assert.equal(r.status, 413);
  await r.text();
  r = await rest('%FF', '{}');
  assert.equal(r.status, 404);
  assert.match((await r.json()).error.message, /not UTF-8/);
  r = await rest('run_code', JSON.stringify({ code: '6 * 7' }));
  assert.equal((await r.json()).structuredContent.result, '42');
  // The 2024-11-05 transport's session id, from its endpoint event.
  const ac = new AbortController();
  const sse = await fetch(`http://127.0.0.1:${port}/sse`, { headers: { Accept: 'text/event-stream' }, signal: ac.signal });
  const reader = sse.body.getReader();
  let text = '';
  while (!/sessionId=([0-9a-f]+)/.test(text)) text += new TextDecoder().decode((await reader.read()).value);
  const legacy = /sessionId=([0-9a-f]+)/.exec(text)[1];
  r = await post(url, { jsonrpc: '2.0', id: 5, method: 'ping' }, { 'Mcp-Session-Id': legacy });
  assert.equal(r.status, 404);
  await r.text();
  ac.abort();
  assert.equal(child.exitCode, null);
});

test('a REST call that outlasts http.keepalive_s is still one JSON body', async () => {
  const cfg = join(dir, 'rest-keepalive.toml');
  writeFileSync(cfg, '[http]\nkeepalive_s = 1\n');
  const { port } = await start(['--config', cfg]);
  const r = await fetch(`http://127.0.0.1:${port}/api/v1/tools/run_code`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ code: "import time\ntime.sleep(7)\nprint('done')" }) });
  assert.equal(r.status, 200);
  const body = await r.text();
  assert.equal(JSON.parse(body).structuredContent.stdout, 'done\n');
  assert.match(body, /^ +\{/, 'kept alive with white space, which JSON allows');
});

test('ambiguous framing (two lengths, two Hosts, two Authorizations or session ids) is a 400 that closes the connection: nothing is smuggled', async () => {
  const { port } = await start();
  const raw = (text) => rawHttp(port, text);
  const inner = 'GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';
  const body = '{"a":1}' + inner;
  // The first length ended the body early, and the rest came back as a second request.
  let got = await raw(`POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 7\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
  assert.equal(got.match(/HTTP\/1\.1 /g).length, 1, got);
  assert.match(got, /^HTTP\/1\.1 400 /);
  assert.doesNotMatch(got, /mcp_sandboxes_active/);
  got = await raw('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n');
  assert.match(got, /^HTTP\/1\.1 400 /);
  got = await raw('POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n');
  assert.match(got, /^HTTP\/1\.1 400 /);
  // Which one would be checked, which one a proxy in front logs? Neither: refused.
  got = await raw('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer a\r\nAuthorization: Bearer b\r\n\r\n');
  assert.match(got, /^HTTP\/1\.1 400 .*two Content-Length, Transfer-Encoding, Host, Authorization or Mcp-Session-Id headers/s);
  // Which session: the one we would look up, or the one a proxy in front routes by?
  const sid = await session(`http://127.0.0.1:${port}/mcp`);
  const ping = '{"jsonrpc":"2.0","id":2,"method":"ping"}';
  got = await raw(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: ${JSON_SSE}\r\n` +
    `Mcp-Session-Id: ${sid}\r\nMcp-Session-Id: ${'0'.repeat(sid.length)}\r\nContent-Length: ${ping.length}\r\n\r\n${ping}`);
  assert.match(got, /^HTTP\/1\.1 400 .*Mcp-Session-Id headers/s);
  got = await raw(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: ${JSON_SSE}\r\n` +
    `Mcp-Session-Id: ${sid}\r\nContent-Length: ${ping.length}\r\nConnection: close\r\n\r\n${ping}`);
  assert.match(got, /^HTTP\/1\.1 200 [^]*"result":\{\}/);
  // One of each is served as ever.
  got = await raw('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
  assert.match(got, /^HTTP\/1\.1 200 /);
});

test('a header name with white space before its colon, or a folded line after an empty value, is a 400 that closes the connection', async () => {
  // libmicrohttpd 0.9.75 keeps "Content-Length " as a name of its own, and folds "Content-Length:"
  // CRLF SP "44" into a name "Content-Length44" with no value: the body went unread and came
  // back as a second request, where a proxy in front that trims or unfolds (RFC 9112 5.1, 5.2)
  // framed it as the first one's body.
  const { port } = await start();
  const raw = (text) => rawHttp(port, text);
  const inner = 'GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';
  for (const h of [`Content-Length : ${inner.length}`, `Content-Length\t: ${inner.length}`, `Content-Length:\r\n ${inner.length}`,
    'Transfer-Encoding:\r\n chunked', 'X-Anything : 1']) {
    const got = await raw(`POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n${h}\r\n\r\n${inner}`);
    assert.equal(got.match(/HTTP\/1\.1 /g).length, 1, `${h}: ${got}`);
    assert.match(got, /^HTTP\/1\.1 400 [^]*header name/, h);
    assert.doesNotMatch(got, /mcp_sandboxes_active/, h);
  }
  // A value folded onto a second line (obs-fold) is joined by the library, as RFC 9112 5.2 allows.
  const got = await raw('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Note: a\r\n b\r\nConnection: close\r\n\r\n');
  assert.match(got, /^HTTP\/1\.1 200 /);
});

test('a Transfer-Encoding other than chunked alone is answered at once (400, or 501 for a coding before chunked) and closes the connection', async () => {
  // Before, libmicrohttpd read such a body until the client closed, and answered nothing: a
  // proxy in front that framed it as chunked had the next request it sent swallowed.
  const { port } = await start();
  const raw = (text) => rawHttp(port, text);
  const ping = '{"jsonrpc":"2.0","id":1,"method":"ping"}';
  const chunks = `${ping.length.toString(16)}\r\n${ping}\r\n0\r\n\r\n`;
  const head = (te) => `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: ${JSON_SSE}\r\nTransfer-Encoding: ${te}\r\n\r\n`;
  for (const [te, status] of [['gzip, chunked', 501], ['chunked, identity', 400], ['identity', 400], ['chunked ', 400]]) {
    const got = await raw(head(te) + chunks + 'GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    assert.match(got, new RegExp(`^HTTP/1\\.1 ${status} [^]*Transfer-Encoding`), `${te}: ${got}`);
    assert.equal(got.match(/HTTP\/1\.1 /g).length, 1, got);
  }
  // chunked alone is framed as ever (and with no session, refused for that).
  const got = await raw(head('chunked').replace('\r\n\r\n', '\r\nConnection: close\r\n\r\n') + chunks);
  assert.match(got, /^HTTP\/1\.1 400 [^]*Mcp-Session-Id header is required/);
});

test('a body declared over http.max_body_bytes is refused before it is sent, not invited with 100 Continue', async () => {
  // Before, the server answered 100 Continue and then read (and threw away) all 10 GB.
  const { port } = await start();
  const got = await rawHttp(port, `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: ${JSON_SSE}\r\nExpect: 100-continue\r\nContent-Length: 10000000000\r\n\r\n`);
  assert.match(got, /^HTTP\/1\.1 413 [^]*request body too large/);
  assert.doesNotMatch(got, /100 Continue/);
});

test('a 405 names the methods its resource takes', async () => {
  const { port } = await start();
  const base = `http://127.0.0.1:${port}`;
  for (const [method, path, allow] of [['POST', '/sse', 'GET'], ['DELETE', '/messages', 'POST'],
    ['GET', '/api/v1/tools/run_code', 'POST'], ['PUT', '/mcp', 'GET, POST, DELETE']]) {
    const r = await fetch(base + path, { method, headers: { Accept: JSON_SSE } });
    assert.equal(r.status, 405, `${method} ${path}`);
    assert.equal(r.headers.get('allow'), allow, `${method} ${path}`);
    await r.text();
  }
});

test('HEAD is a GET without the body; Accept sent on two lines is one list', async () => {
  const { url, port } = await start();
  const base = `http://127.0.0.1:${port}`;
  for (const path of ['/healthz', '/metrics', '/api/v1/openapi.json']) {
    const r = await fetch(base + path, { method: 'HEAD' });
    assert.equal(r.status, 200, `HEAD ${path}`);
    assert.equal(await r.text(), '');
  }
  assert.equal((await fetch(url, { method: 'HEAD' })).status, 405);
  // fetch joins repeated headers itself: two raw lines, as a client may send them.
  const sid = await session(url);
  const body = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' });
  const got = await rawHttp(port, `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\n` +
    `Accept: application/json\r\nAccept: text/event-stream\r\nMcp-Session-Id: ${sid}\r\n` +
    `Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
  assert.match(got, /^HTTP\/1\.1 200 /, got);
});

test('a client that disconnects mid-stream does not cancel its execution', async () => {
  const { url } = await start();
  const sid = await session(url);
  const ac = new AbortController();
  const r = await post(url, { jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'run_code', arguments: { code: "import time\ntime.sleep(1)\nopen('/workspace/done.txt','w').write('finished')" } } },
    { 'Mcp-Session-Id': sid }, { signal: ac.signal });
  assert.equal(r.headers.get('content-type'), 'text/event-stream');
  ac.abort();
  await new Promise((res) => setTimeout(res, 2000));
  const read = await post(url, { jsonrpc: '2.0', id: 6, method: 'tools/call', params: { name: 'read_file', arguments: { path: 'done.txt' } } }, { 'Mcp-Session-Id': sid });
  const text = await read.text();
  assert.match(text, /finished/, 'the execution ran to its end');
});

test('the deprecated HTTP+SSE transport (GET /sse, POST /messages) serves older clients', async () => {
  const { SSEClientTransport } = await import('@modelcontextprotocol/sdk/client/sse.js');
  const { url, port } = await start();
  const client = new Client({ name: 'e2e-legacy', version: '1' });
  await client.connect(new SSEClientTransport(new URL(`http://127.0.0.1:${port}/sse`)));
  const r = await client.callTool({ name: 'run_code', arguments: { code: '2 ** 10' } });
  assert.equal(r.structuredContent.result, '1024');
  assert.deepEqual(await client.ping(), {});
  await client.close();
  const bad = await fetch(`http://127.0.0.1:${port}/messages?sessionId=nope`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' });
  assert.equal(bad.status, 404);
  assert.ok(url);
});

test('file links: signed and expiring, Range, the seed route, and only for the owner', async () => {
  const { url, port } = await start();
  const client = await sdkClient(url);
  const r = await client.callTool({ name: 'run_code', arguments: { code: "open('report.txt', 'w').write('0123456789' * 10)" } });
  const link = r.content.find((x) => x.type === 'resource_link' && x.name === 'report.txt');
  assert.ok(link, 'the changed file is linked');
  const dl = link._meta['mcp-sandbox/download'];
  assert.match(dl, new RegExp(`^http://127\\.0\\.0\\.1:${port}/files/sb-[0-9a-f]{12}/report\\.txt\\?exp=\\d+&sig=[0-9a-f]{64}$`));
  let res = await fetch(dl);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'text/plain');
  assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
  assert.match(res.headers.get('content-security-policy'), /^sandbox;/);
  assert.equal(res.headers.get('content-disposition'), null, 'plain text is shown inline');
  assert.equal((await res.text()).length, 100);
  // The link's exp as it was signed, digits only: no sign, space or tail the number parser
  // would have skipped.
  for (const bent of [dl.replace('exp=', 'exp=%2B'), dl.replace('exp=', 'exp=%20'), dl.replace(/exp=(\d+)/, 'exp=$1x')]) {
    const r2 = await fetch(bent);
    assert.equal(r2.status, 404, bent);
    await r2.text();
  }
  // A page sandbox code wrote must not run as this server's origin: a download, sandboxed.
  const page = await client.callTool({ name: 'run_code', arguments: { code: "open('r\u00e9port x.html', 'w').write('<script>fetch(\"/mcp\")</script>')" } });
  const pageLink = page.content.find((x) => x.type === 'resource_link' && x.name.endsWith('.html'));
  res = await fetch(pageLink._meta['mcp-sandbox/download']);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'text/html');
  assert.equal(res.headers.get('content-disposition'), `attachment; filename="r__port_x.html"; filename*=UTF-8''r%C3%A9port%20x.html`);
  assert.match(res.headers.get('content-security-policy'), /^sandbox; default-src 'none'/);
  assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
  res = await fetch(dl, { headers: { Range: 'bytes=10-19' } });
  assert.equal(res.status, 206);
  assert.equal(res.headers.get('content-range'), 'bytes 10-19/100');
  assert.equal(await res.text(), '0123456789');
  assert.equal((await fetch(dl, { headers: { Range: 'bytes=500-' } })).status, 416);
  assert.equal((await fetch(dl, { headers: { Range: 'bytes=-0' } })).status, 416);
  res = await fetch(dl, { headers: { Range: 'bytes=-5' } });
  assert.equal(res.status, 206);
  assert.equal(res.headers.get('content-range'), 'bytes 95-99/100');
  await res.text();
  // An unknown unit, several ranges or a malformed one: the whole file (RFC 9110 14.2), where
  // they once got 416 (or, for bytes=-1-2, one byte).
  for (const range of ['items=0-1', 'bytes=0-1,3-4', 'bytes=-1-2', 'bytes=5-3', 'bytes=x-1']) {
    res = await fetch(dl, { headers: { Range: range } });
    assert.equal(res.status, 200, range);
    assert.equal((await res.text()).length, 100, range);
  }
  const tampered = dl.replace(/sig=(.)/, (m, ch) => `sig=${ch === 'a' ? 'b' : 'a'}`);
  assert.equal((await fetch(tampered)).status, 404);
  assert.equal((await fetch(dl.replace('report.txt', 'other.txt'))).status, 404, 'a signature covers one path only');
  // A %00 would cut the decoded path there (the library hands on a C string): before, this
  // served report.txt under another name. Refused, as it is in any URL.
  for (const nul of [dl.replace('report.txt', 'report.txt%00.html'), dl.replace('exp=', 'x=%00&exp='), `http://127.0.0.1:${port}/mcp%00x`]) {
    res = await fetch(nul);
    assert.equal(res.status, 400, nul);
    assert.match(await res.text(), /encoded NUL/);
  }
  const unsigned = dl.split('?')[0];
  assert.equal((await fetch(unsigned)).status, 404, 'no signature, no session: nothing');
  const id = link.uri.split('/')[2];
  const owner = client.transport.sessionId;
  res = await fetch(`http://127.0.0.1:${port}/sandbox/file?sandbox_id=${id}&file_path=/workspace/report.txt`, { headers: { 'Mcp-Session-Id': owner } });
  assert.equal(res.status, 200, 'the seed-compatible route works for the owner');
  const stranger = await sdkClient(url);
  res = await fetch(unsigned, { headers: { 'Mcp-Session-Id': stranger.transport.sessionId } });
  assert.equal(res.status, 404, 'another session is not the owner');
  await client.close();
  await stranger.close();
});

// A raw GET of a download link: resolves with the status line, Content-Length, the body bytes
// that came before the server closed the connection, and how long the body took after `resume`.
// The reader pauses after the first bytes so that the socket buffers fill and the server is
// mid-file when `whilePaused` runs.
function pausedDownload(port, link, whilePaused) {
  return new Promise((resolve, reject) => {
    const u = new URL(link);
    const sock = net.connect(port, '127.0.0.1');
    let head = Buffer.alloc(0), headText = null, body = 0, resumedAt = 0, paused = false;
    const finish = () => {
      const m = headText ? headText.match(/\r\ncontent-length: (\d+)\r\n/i) : null;
      resolve({ status: headText ? headText.split('\r\n')[0] : '', length: m ? Number(m[1]) : -1, body,
        ms: resumedAt ? Date.now() - resumedAt : -1 });
    };
    sock.on('data', (d) => {
      if (headText === null) {
        head = Buffer.concat([head, d]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        headText = head.subarray(0, end + 4).toString('latin1');
        body += head.length - end - 4;
      } else {
        body += d.length;
      }
      if (!paused) {
        paused = true;
        sock.pause();
        setTimeout(async () => {
          try { await whilePaused(); } catch (e) { sock.destroy(); reject(e); return; }
          resumedAt = Date.now();
          sock.resume();
        }, 500);
      }
    });
    sock.on('error', () => {});
    sock.on('close', finish);
    sock.write(`GET ${u.pathname}${u.search} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`);
  });
}

test('a download whose file shrinks mid-transfer fails at once; one that grows sends Content-Length bytes', async () => {
  const { url, port } = await start();
  const client = await sdkClient(url);
  const make = await client.callTool({ name: 'run_code', arguments: { code: "open('big.bin', 'wb').write(bytes(64 << 20))" } });
  const dl = make.content.find((x) => x.type === 'resource_link' && x.name === 'big.bin')._meta['mcp-sandbox/download'];
  const head = await fetch(dl, { method: 'HEAD' });
  assert.equal(head.status, 200);
  assert.equal(head.headers.get('content-length'), String(64 << 20));
  assert.equal(await head.text(), '');
  // Sandbox code truncates the file while the client holds the download paused. The server
  // once sent nothing more and left the client waiting for the connection timeout (30 s).
  const shrunk = await pausedDownload(port, dl, async () => {
    const r = await client.callTool({ name: 'run_code', arguments: { code: "import os\nos.truncate('big.bin', 4096)" } });
    assert.equal(r.structuredContent.success, true);
  });
  assert.match(shrunk.status, /^HTTP\/1\.1 200 /);
  assert.equal(shrunk.length, 64 << 20);
  assert.ok(shrunk.body < shrunk.length, `${shrunk.body} of ${shrunk.length} bytes: the short file is not padded`);
  assert.ok(shrunk.ms < 10000, `closed ${shrunk.ms} ms after the reader resumed`);
  // A file that grows is cut at the length the headers promised, from a range's start too.
  await client.callTool({ name: 'run_code', arguments: { code: "open('big.bin', 'wb').write(bytes(16 << 20))" } });
  const grown = await pausedDownload(port, dl, async () => {
    const r = await client.callTool({ name: 'run_code', arguments: { code: "open('big.bin', 'ab').write(bytes(1 << 20))" } });
    assert.equal(r.structuredContent.success, true);
  });
  assert.equal(grown.length, 16 << 20);
  assert.equal(grown.body, 16 << 20);
  const res = await fetch(dl, { headers: { Range: 'bytes=1000-' } });
  assert.equal(res.status, 206);
  assert.equal(res.headers.get('content-range'), `bytes 1000-${(17 << 20) - 1}/${17 << 20}`);
  assert.equal((await res.arrayBuffer()).byteLength, (17 << 20) - 1000);
  await client.close();
});

test('REST: POST /api/v1/tools/{name} runs the same handlers; openapi.json and /docs list every tool', async () => {
  const { port } = await start();
  const base = `http://127.0.0.1:${port}`;
  const call = (name, args) => fetch(`${base}/api/v1/tools/${name}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(args) });
  let r = await call('run_code', { code: 'v = 5' });
  assert.equal(r.status, 200);
  r = await call('run_code', { code: 'v * 8' });
  const body = await r.json();
  assert.equal(body.structuredContent.result, '40', 'REST calls share their owner\'s default sandbox');
  // The REST client downloads its sandbox's files by path (it could read_file them anyway);
  // before, both routes said "no such file". An MCP session (or a made-up one) may not.
  // (The whole answer is read: a REST response may start before its tool has finished.)
  assert.equal((await (await call('run_code', { code: "open('r.txt', 'w').write('rest file')" })).json()).isError, false);
  const sid = body.structuredContent.sandbox_id;
  r = await fetch(`${base}/files/${sid}/r.txt`);
  assert.equal(r.status, 200);
  assert.equal(await r.text(), 'rest file');
  r = await fetch(`${base}/sandbox/file?sandbox_id=${sid}&file_path=r.txt`);
  assert.equal(await r.text(), 'rest file');
  r = await fetch(`${base}/files/${sid}/r.txt`, { headers: { 'Mcp-Session-Id': 'not-a-session' } });
  assert.equal(r.status, 404);
  await r.text();
  const other = await session(`${base}/mcp`);
  r = await fetch(`${base}/files/${sid}/r.txt`, { headers: { 'Mcp-Session-Id': other } });
  assert.equal(r.status, 404);
  await r.text();
  r = await call('no_such_tool', {});
  assert.equal(r.status, 400);
  assert.ok((await r.json()).error);
  r = await call('run_code', {});
  assert.equal((await r.json()).isError, true, 'bad arguments come back as a tool error, as over MCP');
  // A body the protocol would refuse is refused as /mcp refuses it, and for the reason it has.
  const raw = (body) => fetch(`${base}/api/v1/tools/run_code`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
  for (const [body, code, why] of [
    ['[1', -32700, /parse error: .*line 1/],
    ['{"code": "print(7)", "code": "2"}', -32700, /parse error: duplicate object key/],
    ['{"code": "1", "timeout_s": 123456789012345678901234567890}', -32700, /parse error: too big integer/],
    ['[1]', -32600, /must be a JSON object of the tool's arguments/]]) {
    r = await raw(body);
    assert.equal(r.status, 400, body);
    const { error } = await r.json();
    assert.equal(error.code, code, body);
    assert.match(error.message, why, body);
  }
  // A NUL reaches the tool's schema, which names it, as over /mcp.
  r = await raw('{"code": "print(1)\\u0000"}');
  const nul = JSON.stringify(await r.json());
  assert.match(nul, /NUL/, nul);
  // (control) the duplicate's body with its key once runs.
  r = await raw('{"code": "print(7)"}');
  assert.equal((await r.json()).structuredContent.stdout, '7\n');
  // A body must be declared JSON (a text/plain form is what a page may send cross-site).
  r = await fetch(`${base}/api/v1/tools/run_code`, { method: 'POST', headers: { 'Content-Type': 'text/plain' }, body: '{"code":"1"}' });
  assert.equal(r.status, 415);
  assert.match((await r.json()).error.message, /Content-Type must be application\/json/);
  // (control) no body at all, for a tool without arguments, needs no type.
  assert.equal((await fetch(`${base}/api/v1/tools/list_sandboxes`, { method: 'POST' })).status, 200);
  const api = await (await fetch(`${base}/api/v1/openapi.json`)).json();
  assert.equal(api.openapi, '3.1.0');
  assert.ok(api.paths['/api/v1/tools/run_code'].post.requestBody.content['application/json'].schema.properties.code);
  assert.ok(api.paths['/mcp'].post);
  const docs = await (await fetch(`${base}/docs`)).text();
  assert.match(docs, /\/api\/v1\/tools\/run_code/);
  assert.match(docs, /\/files\/\{sandbox_id\}\/\{path\}/);
});

// Reads SSE events from a fetch body until `stop(event)` says so; resolves with the events.
// The JSON-RPC messages of an SSE response, one at a time, as they come.
async function* eventsOf(res) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  try {
    for (;;) {
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const data = buf.slice(0, i).split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('');
        buf = buf.slice(i + 2);
        if (data) yield JSON.parse(data);
      }
      const { value, done } = await reader.read();
      if (done) return;
      buf += dec.decode(value, { stream: true });
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}

// A session that declared sampling, and a test_sampling call on it waiting for its answer:
// the call's stream, whose first message was the server's sampling/createMessage request.
async function samplingAsked(url, sid, id = 2) {
  const h = { 'Mcp-Session-Id': sid };
  const call = await post(url, { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'test_sampling', arguments: { prompt: 'p' } } }, h);
  assert.equal(call.headers.get('content-type'), 'text/event-stream');
  const events = eventsOf(call);
  const ask = (await events.next()).value;
  assert.equal(ask.method, 'sampling/createMessage');
  return { h, events, ask };
}

// The client's answer to it, in the size the server takes: the call ends with that answer.
async function samplingAnswered(url, { h, events, ask }, id) {
  const result = { role: 'assistant', content: { type: 'text', text: 'fine' }, model: 'm' };
  assert.equal((await post(url, { jsonrpc: '2.0', id: ask.id, result }, h)).status, 202);
  const done = (await events.next()).value;
  assert.equal(done.id, id, JSON.stringify(done));
  assert.equal(done.result.isError, undefined, JSON.stringify(done));
  assert.match(done.result.content[0].text, /fine/);
  await events.return();
}

// A POST's SSE stream read up to its priming event (an id, no data), then dropped by the
// client: the id to resume from.
async function primedThenDropped(r) {
  const reader = r.body.getReader();
  let head = '';
  while (!head.includes('\n\n'))
    head += new TextDecoder().decode((await reader.read()).value);
  await reader.cancel();
  return head.match(/^id: (\S+)$/m)[1];
}

async function readEvents(res, stop) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  const events = [];
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const ev = { id: null, data: '' };
      for (const line of block.split('\n')) {
        if (line.startsWith('id: ')) ev.id = line.slice(4);
        else if (line.startsWith('data: ')) ev.data += line.slice(6);
      }
      if (!ev.data) continue;
      ev.msg = JSON.parse(ev.data);
      events.push(ev);
      if (stop(ev)) {
        await reader.cancel();
        return events;
      }
    }
  }
  return events;
}

test('a dropped POST stream resumes with Last-Event-ID: the missed progress and the result, nothing twice', async () => {
  const { url } = await start();
  const sid = await session(url);
  const h = { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-11-25' };
  const call = { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'test_slow', arguments: { ms: 600, steps: 4 }, _meta: { progressToken: 'p' } } };
  const r = await post(url, call, h);
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^text\/event-stream/);
  // Take the first progress event, then drop the connection.
  const first = await readEvents(r, () => true);
  assert.equal(first[0].msg.method, 'notifications/progress');
  assert.equal(first[0].msg.params.progress, 1);
  assert.match(first[0].id, /^\d+-\d+$/);
  const res = await fetch(url, { headers: { ...h, Accept: 'text/event-stream', 'Last-Event-ID': first[0].id } });
  assert.equal(res.status, 200);
  const rest = await readEvents(res, (ev) => ev.msg.id === 7);
  const progress = rest.filter((e) => e.msg.method === 'notifications/progress').map((e) => e.msg.params.progress);
  assert.deepEqual(progress, [2, 3, 4]);
  assert.equal(rest.at(-1).msg.result.content[0].text, 'done');
  // An id the buffer never issued cannot be resumed.
  const gone = await fetch(url, { headers: { ...h, Accept: 'text/event-stream', 'Last-Event-ID': '99-99999' } });
  assert.equal(gone.status, 404);
  await gone.text();
  // Reconnecting while the server still counts the dropped GET stream as open replaces it.
  const again = await fetch(url, { headers: { ...h, Accept: 'text/event-stream' } });
  assert.equal(again.status, 200);
  await again.body.cancel();
});

test('a resumed request stream leaves the GET stream alone, and keeps its response from it', async () => {
  const { url } = await start();
  const sid = await session(url);
  const h = { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-11-25' };
  const sse = { ...h, Accept: 'text/event-stream' };
  const a = await fetch(url, { headers: sse });
  assert.equal(a.status, 200);
  const r = await post(url, { jsonrpc: '2.0', id: 'long', method: 'tools/call', params: { name: 'test_slow', arguments: { ms: 1500 } } }, h);
  // The priming event (an id, no data); then the client drops the stream.
  const primed = await primedThenDropped(r);
  const b = await fetch(url, { headers: { ...sse, 'Last-Event-ID': primed } });
  assert.equal(b.status, 200);
  // A plain GET now replaces the session's GET stream (a), and only that one.
  const c = await fetch(url, { headers: sse });
  assert.equal(c.status, 200);
  const rest = await readEvents(b, (ev) => ev.msg && ev.msg.id === 'long');
  assert.equal(rest.at(-1).msg.result.content[0].text, 'done');
  // The standalone stream carries no response (2025-11-25: only a resumed request's does).
  const onC = await Promise.race([readEvents(c, (ev) => ev.msg && ev.msg.id === 'long'),
    new Promise((res) => setTimeout(() => res([]), 500))]);
  assert.deepEqual(onC.filter((ev) => ev.msg && ev.msg.id === 'long'), []);
  await c.body.cancel().catch(() => {});
  await a.body.cancel().catch(() => {});
});

test('a request stream resumed after its call ended replays the rest and ends; the GET stream stays', async () => {
  // Before, with the dropped stream gone, the resume stayed open for ever and took the place
  // of the session's GET stream.
  const { url } = await start();
  const sid = await session(url);
  const h = { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-11-25' };
  const sse = { ...h, Accept: 'text/event-stream' };
  const r = await post(url, { jsonrpc: '2.0', id: 'ended', method: 'tools/call', params: { name: 'test_slow', arguments: { ms: 600 } } }, h);
  const primed = await primedThenDropped(r);
  await new Promise((res) => setTimeout(res, 1200)); // the call ends with nobody reading
  const a = await fetch(url, { headers: sse });
  assert.equal(a.status, 200);
  const endsWithin = async (res, ms) => Promise.race([res.text(), new Promise((ok) => setTimeout(() => ok(null), ms))]);
  const b = await fetch(url, { headers: { ...sse, 'Last-Event-ID': primed } });
  assert.equal(b.status, 200);
  const body = await endsWithin(b, 3000);
  assert.notEqual(body, null, 'the resumed stream ends after the response');
  assert.match(body, /"id":"ended","result":/);
  // From the response's own id: nothing is left, and the stream ends at once.
  const lastId = [...body.matchAll(/^id: (\S+)$/mg)].at(-1)[1];
  const c = await fetch(url, { headers: { ...sse, 'Last-Event-ID': lastId } });
  assert.equal(c.status, 200);
  assert.equal(await endsWithin(c, 3000), '');
  // Neither resume ended the session's GET stream, which a resume that took its place did.
  const rd = a.body.getReader();
  const deadline = Date.now() + 500;
  let ended = false;
  for (;;) {
    const got = await Promise.race([rd.read(), new Promise((ok) => setTimeout(() => ok('quiet'), Math.max(0, deadline - Date.now())))]);
    if (got === 'quiet') break;
    if (got.done) { ended = true; break; }
  }
  assert.equal(ended, false, 'the GET stream is still open');
  await rd.cancel().catch(() => {});
});

test('a resumed request stream lost before its first event resumes again from the same id', async () => {
  // Before, the second resume found nothing under that id's stream and became the session's GET
  // stream: the request's progress and response went to the first resume, whose client had
  // gone, and the client waited for ever.
  const { url } = await start();
  const sid = await session(url);
  const h = { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-11-25' };
  const sse = { ...h, Accept: 'text/event-stream' };
  const call = { jsonrpc: '2.0', id: 'twice', method: 'tools/call', params: { name: 'test_slow', arguments: { ms: 1500, steps: 3 }, _meta: { progressToken: 'q' } } };
  const r = await post(url, call, h);
  const primed = await primedThenDropped(r);
  // The first resume is lost at once; the client resumes again from the id it last saw.
  const b = await fetch(url, { headers: { ...sse, 'Last-Event-ID': primed } });
  assert.equal(b.status, 200);
  await b.body.cancel();
  const c = await fetch(url, { headers: { ...sse, 'Last-Event-ID': primed } });
  assert.equal(c.status, 200);
  const rest = await Promise.race([readEvents(c, (ev) => ev.msg.id === 'twice'),
    new Promise((res) => setTimeout(() => res('no response within 5 s'), 5000))]);
  assert.notEqual(rest, 'no response within 5 s');
  assert.deepEqual(rest.filter((e) => e.msg.method === 'notifications/progress').map((e) => e.msg.params.progress), [1, 2, 3]);
  assert.equal(rest.at(-1).msg.result.content[0].text, 'done');
});

test('a call answered at once is one JSON body; one still running after a moment becomes an SSE stream, priming event first', async () => {
  const { url } = await start();
  const sid = await session(url);
  const h = { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-11-25' };
  const call = (id, code) => post(url, { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'run_code', arguments: { code } } }, h);
  await (await call(20, 'x = 6')).text(); // the default sandbox is up and warm
  // Quick calls: whichever way each came, it is whole and right; on a machine that is not
  // stalled for a quarter of a second they come as plain JSON.
  let json = 0;
  for (let id = 21; id < 26; id++) {
    const r = await call(id, 'x * 7');
    assert.equal(r.status, 200);
    const text = await r.text();
    if (r.headers.get('content-type').startsWith('application/json')) {
      json++;
      const body = JSON.parse(text);
      assert.equal(body.id, id);
      assert.equal(body.result.structuredContent.result, '42');
    } else {
      assert.match(text, new RegExp(`"id":${id},"result":.*"result":"42"`));
    }
  }
  assert.ok(json > 0, 'a quick answer goes out as one JSON body');
  const slow = await call(30, 'import time\ntime.sleep(0.8)\nx * 7');
  assert.match(slow.headers.get('content-type'), /^text\/event-stream/);
  const text = await slow.text();
  assert.match(text, /^id: \d+-\d+\nretry: \d+\ndata: \n\n/, 'the stream opens with the priming event');
  assert.match(text, /"id":30,"result":.*"result":"42"/);
});

test('CORS: off by default; a configured origin gets Allow-Origin and a preflight answer', async () => {
  const plain = await start();
  const r0 = await post(plain.url, INIT, { Origin: `http://127.0.0.1:${plain.port}` });
  assert.equal(r0.status, 200);
  assert.equal(r0.headers.get('access-control-allow-origin'), null);
  await r0.text();
  const cfg = join(dir, 'cors.toml');
  writeFileSync(cfg, '[http]\ncors_origins = ["http://localhost:5173"]\nallowed_origins = ["http://localhost:5173"]\n');
  const { url } = await start(['--config', cfg]);
  const pre = await fetch(url, { method: 'OPTIONS', headers: { Origin: 'http://localhost:5173', 'Access-Control-Request-Method': 'POST' } });
  assert.equal(pre.status, 204);
  assert.equal(pre.headers.get('access-control-allow-origin'), 'http://localhost:5173');
  assert.match(pre.headers.get('access-control-allow-headers'), /Mcp-Session-Id/);
  assert.match(pre.headers.get('access-control-allow-methods'), /DELETE/);
  // Every path answers its preflight with its own methods: a download with an Authorization
  // header is preflighted too (it was a 404). An unknown path stays a 404, another method a 405.
  const base = new URL(url).origin;
  const ask = (path) => fetch(base + path, { method: 'OPTIONS', headers: { Origin: 'http://localhost:5173', 'Access-Control-Request-Method': 'GET', 'Access-Control-Request-Headers': 'authorization' } });
  for (const [path, methods] of [['/files/sb-000000000000/a.txt', 'GET, HEAD'], ['/sandbox/file', 'GET, HEAD'], ['/api/v1/tools/run_code', 'POST'], ['/sse', 'GET'], ['/metrics', 'GET, HEAD']]) {
    const p = await ask(path);
    assert.equal(p.status, 204, path);
    assert.equal(p.headers.get('access-control-allow-methods'), methods, path);
    assert.equal(p.headers.get('access-control-allow-origin'), 'http://localhost:5173', path);
    assert.match(p.headers.get('access-control-allow-headers'), /Authorization/, path);
  }
  assert.equal((await ask('/nowhere')).status, 404);
  const wrong = await fetch(`${base}/healthz`, { method: 'POST', body: '{}' });
  assert.equal(wrong.status, 405);
  assert.equal(wrong.headers.get('allow'), 'GET, HEAD');
  const r = await post(url, INIT, { Origin: 'http://localhost:5173' });
  assert.equal(r.status, 200);
  assert.equal(r.headers.get('access-control-allow-origin'), 'http://localhost:5173');
  assert.match(r.headers.get('access-control-expose-headers'), /Mcp-Session-Id/);
  await r.text();
  assert.equal((await post(url, INIT, { Origin: 'http://evil.example' })).status, 403);
});

test('CORS: a configured origin may read a 401\'s WWW-Authenticate, which names the metadata a browser client discovers auth from', async () => {
  // Before, only Mcp-Session-Id was exposed: a page's fetch saw the 401 but not the challenge.
  const tokens = join(dir, 'tokens-cors');
  writeFileSync(tokens, 'alice:alice-secret-token\n');
  const cfg = join(dir, 'cors-auth.toml');
  writeFileSync(cfg, `[http]\nauth_tokens_file = "${tokens}"\ncors_origins = ["http://localhost:5173"]\nallowed_origins = ["http://localhost:5173"]\n`);
  const { url } = await start(['--config', cfg]);
  const r = await post(url, INIT, { Origin: 'http://localhost:5173' });
  assert.equal(r.status, 401);
  assert.match(r.headers.get('www-authenticate'), /resource_metadata=/);
  assert.equal(r.headers.get('access-control-allow-origin'), 'http://localhost:5173');
  const exposed = r.headers.get('access-control-expose-headers').split(',').map((h) => h.trim().toLowerCase());
  assert.ok(exposed.includes('www-authenticate'), exposed.join(', '));
  assert.ok(exposed.includes('mcp-session-id'), exposed.join(', '));
  await r.text();
});

test('SEP-1699: the server closes a call\'s stream early and the SDK client resumes it for the result', async () => {
  const { url } = await start();
  const r = await post(url, INIT);
  const sid = r.headers.get('mcp-session-id');
  await r.text();
  const h = { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-11-25' };
  // Raw: the stream opens with a priming event (id, retry, empty data) and ends without a result.
  const call = await post(url, { jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'test_reconnection', arguments: {} } }, h);
  const text = await call.text();
  const prime = text.match(/^id: (\d+-\d+)\nretry: (\d+)\ndata: \n\n/);
  assert.ok(prime, text);
  assert.doesNotMatch(text, /Reconnection test completed/);
  const res = await fetch(url, { headers: { ...h, Accept: 'text/event-stream', 'Last-Event-ID': prime[1] } });
  const events = await readEvents(res, (ev) => ev.msg.id === 9);
  assert.equal(events.at(-1).msg.result.content[0].text, 'Reconnection test completed');
  // The SDK does the same by itself.
  const client = await sdkClient(url);
  const out = await client.callTool({ name: 'test_reconnection', arguments: {} });
  assert.equal(out.content[0].text, 'Reconnection test completed');
  await client.close();
});
