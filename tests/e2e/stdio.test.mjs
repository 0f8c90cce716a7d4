// The real binary over stdio, driven by the official TypeScript SDK and by raw lines.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CompleteResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { connect, rawServer, INIT, cleanup, BIN } from './helpers.mjs';

after(cleanup);

test('SDK: initialize negotiates 2025-11-25 and reports serverInfo', async () => {
  const { client } = await connect();
  assert.equal(client.getServerVersion().name, 'mcp-sandbox');
  assert.ok(client.getServerCapabilities().tools);
  await client.close();
});

for (const v of ['2025-11-25', '2025-06-18', '2025-03-26']) {
  test(`raw: version ${v} is accepted as asked`, async () => {
    const s = rawServer();
    s.send(INIT(1, v));
    const r = await s.waitFor((m) => m.id === 1);
    assert.equal(r.result.protocolVersion, v);
    s.child.stdin.end();
    assert.equal((await s.exited).code, 0);
  });
}

test('raw: an unknown version is answered with the latest', async () => {
  const s = rawServer();
  s.send(INIT(1, '1999-01-01'));
  const r = await s.waitFor((m) => m.id === 1);
  assert.equal(r.result.protocolVersion, '2025-11-25');
  s.child.stdin.end();
  await s.exited;
});

test('SDK: tools/list and ping', async () => {
  const { client } = await connect();
  const { tools } = await client.listTools();
  assert.ok(tools.some((t) => t.name === 'test_slow'));
  for (const t of tools) {
    assert.equal(t.inputSchema.type, 'object');
    assert.equal(t.inputSchema.additionalProperties, false);
  }
  assert.deepEqual(await client.ping(), {});
  await client.close();
});

test('raw: without --test-fixtures the server registers no fake tools', async () => {
  const s = rawServer();
  s.send(INIT(1));
  s.send('{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n');
  const r = await s.waitFor((m) => m.id === 2);
  assert.ok(r.result.tools.some((t) => t.name === 'run_code'));
  assert.ok(!r.result.tools.some((t) => t.name.startsWith('test_')));
  s.child.stdin.end();
  await s.exited;
});

test('raw: error codes for bad lines, and the server keeps answering', async () => {
  const s = rawServer(['--test-fixtures']);
  s.send('{"jsonrpc":"2.0","id":"early","method":"tools/list"}\n');
  const early = await s.waitFor((m) => m.id === 'early');
  assert.equal(early.error.code, -32600);
  assert.match(early.error.message, /initialize/);
  s.send(INIT(1));
  await s.waitFor((m) => m.id === 1);
  const cases = [
    ['{not json', -32700],
    ['[{"jsonrpc":"2.0","id":9,"method":"ping"}]', -32600],
    ['"just a string"', -32600],
    ['{"id":10,"method":"ping"}', -32600],
    ['{"jsonrpc":"1.0","id":11,"method":"ping"}', -32600],
    ['{"jsonrpc":"2.0","id":12,"method":"no/such"}', -32601],
    ['{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"nope"}}', -32602],
    ['{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{}}', -32602],
    ['{"jsonrpc":"2.0","id":15,"method":"logging/setLevel","params":{"level":"loud"}}', -32602],
    ['{"jsonrpc":"2.0","id":16,"method":"resources/read","params":{"uri":"x://y"}}', -32002],
    ['{"jsonrpc":"2.0","id":17,"method":"tools/list","params":{"cursor":"bogus"}}', -32602],
    ['{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', -32600],
    // Errors that quote a long non-ASCII name, cut inside a character: still answered.
    [`{"jsonrpc":"2.0","id":18,"method":"${'é'.repeat(300)}"}`, -32601],
    [`{"jsonrpc":"2.0","id":19,"method":"tools/call","params":{"name":"${'é'.repeat(300)}"}}`, -32602],
    [`{"jsonrpc":"2.0","id":21,"method":"resources/read","params":{"uri":"${'é'.repeat(250)}"}}`, -32002],
  ];
  for (const [line, code] of cases) {
    const before = s.replies.length;
    s.send(line + '\n');
    await s.waitFor((m) => s.replies.indexOf(m) >= before && m.error);
    assert.equal(s.replies[s.replies.length - 1].error.code, code, line);
  }
  // Valid JSON that the parser refuses (an integer past 64 bits, a key given twice) is an
  // invalid request, still answered under its own id, which the client waits for; an id a
  // double cannot hold exactly cannot be, and gets null.
  const refused = [
    [22, '{"jsonrpc":"2.0","id":22,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"a","offset":18446744073709551615}}}', /too big integer/],
    ['dup', '{"jsonrpc":"2.0","id":"dup","method":"tools/call","params":{"name":"run_code","arguments":{"code":"1","code":"2"}}}', /duplicate object key/],
    [null, '{"jsonrpc":"2.0","id":18446744073709551615,"method":"ping"}', /too big integer/],
  ];
  for (const [id, line, why] of refused) {
    const before = s.replies.length;
    s.send(line + '\n');
    const r = await s.waitFor((m) => s.replies.indexOf(m) >= before && m.error);
    assert.equal(r.id, id, line);
    assert.equal(r.error.code, -32600, line);
    assert.match(r.error.message, why);
  }
  // Invalid UTF-8 and deep nesting: errors, not crashes.
  s.child.stdin.write(Buffer.concat([Buffer.from('{"jsonrpc":"2.0","id":20,"method":"ping","x":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}\n')]));
  await s.waitFor((m) => m.error && m.error.code === -32700 && /UTF-8|unicode/i.test(m.error.message));
  s.send('['.repeat(100000) + ']'.repeat(100000) + '\n');
  await s.waitFor((m) => m.error && /depth|nest/i.test(m.error.message));
  s.send('{"jsonrpc":"2.0","id":99,"method":"ping"}\n');
  const pong = await s.waitFor((m) => m.id === 99);
  assert.deepEqual(pong.result, {});
  s.child.stdin.end();
  assert.equal((await s.exited).code, 0);
});

test('raw: a 2025-03-26 session takes batches, answered as one array once all are done', async () => {
  const s = rawServer(['--test-fixtures']);
  s.send('[{"jsonrpc":"2.0","id":0,"method":"ping"}]\n');
  const early = await s.waitFor((m) => !Array.isArray(m) && m.error);
  assert.match(early.error.message, /before initialize/);
  s.send(INIT(1, '2025-03-26'));
  await s.waitFor((m) => m.id === 1);
  s.send(JSON.stringify([
    { jsonrpc: '2.0', id: 2, method: 'ping' },
    { jsonrpc: '2.0', method: 'notifications/whatever' },
    { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'test_slow', arguments: { ms: 200, steps: 2 }, _meta: { progressToken: 'p' } } },
    { jsonrpc: '2.0', id: 4, method: 'no/such' },
    5,
    { jsonrpc: '2.0', id: 6, method: 'initialize', params: {} },
  ]) + '\n');
  const batch = await s.waitFor((m) => Array.isArray(m));
  const by = (id) => batch.find((r) => r.id === id);
  assert.equal(batch.length, 5, JSON.stringify(batch));
  assert.deepEqual(by(2).result, {});
  assert.equal(by(3).result.content[0].text, 'done');
  assert.equal(by(4).error.code, -32601);
  assert.equal(by(null).error.code, -32600);
  assert.match(by(6).error.message, /initialize must not be part of a batch/);
  // Progress is not held back: it went out on its own, before the answers.
  const progress = s.replies.filter((m) => m.method === 'notifications/progress');
  assert.equal(progress.length, 2);
  assert.ok(s.replies.indexOf(progress[1]) < s.replies.indexOf(batch));
  // An empty batch is one error; a batch of notifications gets nothing.
  s.send('[]\n');
  const empty = await s.waitFor((m) => !Array.isArray(m) && m.error && /empty batch/.test(m.error.message));
  assert.equal(empty.error.code, -32600);
  // A cancelled request leaves the batch's other answers; all cancelled, nothing is sent.
  s.send('[{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"test_slow","arguments":{"ms":2000}}},{"jsonrpc":"2.0","id":8,"method":"ping"}]\n');
  s.send('[{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"test_slow","arguments":{"ms":2000}}}]\n');
  s.send('[{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}]\n');
  const rest = await s.waitFor((m) => Array.isArray(m) && m.some((r) => r.id === 8));
  assert.deepEqual(rest.map((r) => r.id), [8]);
  s.send('{"jsonrpc":"2.0","id":10,"method":"ping"}\n');
  await s.waitFor((m) => m.id === 10);
  await new Promise((r) => setTimeout(r, 300));
  assert.ok(!s.replies.some((m) => Array.isArray(m) && m.some((r) => r.id === 7 || r.id === 9)));
  assert.equal(s.replies.filter((m) => Array.isArray(m)).length, 2, 'no answer to the notifications-only batch');
  s.child.stdin.end();
  assert.equal((await s.exited).code, 0);
});

test('raw: a 2025-03-26 session gets resource links as text, which that version has', async () => {
  for (const [v, type] of [['2025-03-26', 'text'], ['2025-06-18', 'resource_link']]) {
    const s = rawServer(['--state-dir', mkdtempSync(join(tmpdir(), 'sbx-e2e-link-'))]);
    s.send(INIT(1, v));
    await s.waitFor((m) => m.id === 1);
    s.send('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"open(\'/workspace/o.txt\', \'w\').write(\'x\')"}}}\n');
    const r = await s.waitFor((m) => m.id === 2, 30000);
    const last = r.result.content[r.result.content.length - 1];
    assert.equal(last.type, type, v);
    if (type === 'text') assert.match(last.text, /^o\.txt: sandbox:\/\/sb-[0-9a-f]+\/files\/o\.txt/);
    s.child.stdin.end();
    await s.exited;
  }
});

test('raw: later versions refuse a batch, saying why', async () => {
  for (const v of ['2025-06-18', '2025-11-25']) {
    const s = rawServer();
    s.send(INIT(1, v));
    await s.waitFor((m) => m.id === 1);
    s.send('[{"jsonrpc":"2.0","id":2,"method":"ping"}]\n');
    const r = await s.waitFor((m) => m.error);
    assert.equal(r.error.code, -32600);
    assert.match(r.error.message, new RegExp(`not supported in protocol version ${v}`));
    s.child.stdin.end();
    await s.exited;
  }
});

test('raw: a client that stops reading stdout does not stop timeouts, other work or SIGTERM', async () => {
  const s = rawServer();
  s.send(INIT(1));
  await s.waitFor((m) => m.id === 1);
  s.send('{"jsonrpc":"2.0","id":"warm","method":"tools/call","params":{"name":"run_code","arguments":{"code":"1"}}}\n');
  await s.waitFor((m) => m.id === 'warm', 30000);
  s.child.stdout.pause();
  s.send('{"jsonrpc":"2.0","id":"B","method":"tools/call","params":{"name":"run_code","arguments":{"code":"while True: pass","timeout_s":1}}}\n');
  for (let i = 0; i < 200; i++) s.send(`{"jsonrpc":"2.0","id":${i + 10},"method":"tools/list"}\n`);
  await new Promise((r) => setTimeout(r, 4000));
  s.child.stdout.resume();
  const b = await s.waitFor((m) => m.id === 'B', 20000);
  assert.equal(b.result.structuredContent.timed_out, true);
  assert.ok(b.result.structuredContent.duration_ms < 3000, `the 1 s timeout took ${b.result.structuredContent.duration_ms} ms`);
  await s.waitFor((m) => m.id === 209, 20000);
  // Not reading again, then SIGTERM: the server still ends.
  s.child.stdout.pause();
  for (let i = 0; i < 200; i++) s.send(`{"jsonrpc":"2.0","id":${i + 300},"method":"tools/list"}\n`);
  await new Promise((r) => setTimeout(r, 500));
  const t0 = Date.now();
  s.child.kill('SIGTERM');
  const end = await s.exited;
  assert.ok(Date.now() - t0 < 8000, `exit took ${Date.now() - t0} ms`);
  assert.equal(end.code, 0);
});

test('raw: a host that never reads the server\'s stderr costs log lines, not answers', async () => {
  // MCP lets a host ignore stderr: here nothing reads it, and each stray response below logs a
  // debug line (300 kB in all, past what the pipe holds).
  const s = rawServer(['--log-level', 'debug']);
  s.child.stderr.pause();
  s.send(INIT(1));
  await s.waitFor((m) => m.id === 1);
  let stray = '';
  for (let i = 0; i < 3000; i++) stray += `{"jsonrpc":"2.0","id":${i + 1000},"result":{}}\n`;
  s.send(stray);
  s.send('{"jsonrpc":"2.0","id":"after","method":"ping"}\n');
  assert.deepEqual((await s.waitFor((m) => m.id === 'after', 10000)).result, {});
  // Read now: every line that went in is whole, and one says how many were lost.
  let log = '';
  s.child.stderr.on('data', (d) => { log += d; });
  s.child.stderr.resume();
  // The next line that fits says how many went: one more stray response at a time until the
  // pipe has room for it (a slow build can still find the pipe full at the first).
  for (let i = 0; i < 50 && !/log lines lost/.test(log); i++) {
    s.send(`{"jsonrpc":"2.0","id":${5000 + i},"result":{}}\n{"jsonrpc":"2.0","id":"last${i}","method":"ping"}\n`);
    await s.waitFor((m) => m.id === `last${i}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const lines = log.split('\n').filter((l) => l);
  for (const l of lines) JSON.parse(l);
  assert.ok(lines.some((l) => /log lines lost/.test(l)), log.slice(-400));
  s.child.kill('SIGTERM');
  assert.equal((await s.exited).code, 0);
});

test('raw: stdin and stdout may be one socket (inetd, socat EXEC:)', () => {
  const script = `
import json, socket, subprocess, sys, time
a, b = socket.socketpair()
p = subprocess.Popen([sys.argv[1], "serve", "--stdio", "--log-level", "error"], stdin=b, stdout=b)
b.close()
send = lambda o: a.sendall((json.dumps(o) + "\\n").encode())
send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}})
for i in range(300):
    send({"jsonrpc": "2.0", "id": i + 1, "method": "tools/list"})
time.sleep(2)
buf = b""
a.settimeout(3)
try:
    while buf.count(b"\\n") < 301:
        d = a.recv(1 << 20)
        if not d:
            break
        buf += d
except socket.timeout:
    pass
ids = {json.loads(l)["id"] for l in buf.split(b"\\n") if l}
print("missing", 301 - len(ids))
a.shutdown(socket.SHUT_WR)
print("rc", p.wait(10))
`;
  const r = spawnSync('python3', ['-c', script, BIN], { encoding: 'utf8', timeout: 60000 });
  assert.equal(r.stdout, 'missing 0\nrc 0\n', r.stderr);
});

test('raw: a client\'s error response is never answered, even with id null or none', async () => {
  const s = rawServer();
  s.send(INIT(1));
  await s.waitFor((m) => m.id === 1);
  s.send('{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"could not parse"}}\n');
  s.send('{"jsonrpc":"2.0","error":{"code":-32600,"message":"no id"}}\n');
  s.send('{"jsonrpc":"2.0","id":"srv-999","result":{}}\n');
  s.send('{"jsonrpc":"2.0","id":2,"method":"ping"}\n');
  await s.waitFor((m) => m.id === 2);
  await new Promise((r) => setTimeout(r, 200));
  assert.deepEqual(s.replies.map((m) => m.id), [1, 2]);
  s.child.stdin.end();
  await s.exited;
});

test('raw: a response without "jsonrpc" is dropped, not answered under an id the client\'s own request has', async () => {
  const s = rawServer(['--test-fixtures']);
  s.send(INIT(1));
  await s.waitFor((m) => m.id === 1);
  s.send('{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"test_slow","arguments":{"ms":300}}}\n');
  s.send('{"id":5,"result":{}}\n');
  s.send('{"jsonrpc":"1.0","id":5,"error":{"code":1,"message":"x"}}\n');
  await s.waitFor((m) => m.id === 5 && m.result);
  s.send('{"jsonrpc":"2.0","id":6,"method":"ping"}\n');
  await s.waitFor((m) => m.id === 6);
  assert.deepEqual(s.replies.filter((m) => m.id === 5), [{ jsonrpc: '2.0', id: 5, result: { content: [{ type: 'text', text: 'done' }] } }],
    'the tool call is answered once, by its result');
  s.child.stdin.end();
  await s.exited;
});

test('raw: a whole number written as 5.0 is the integer 5 to a tool', async () => {
  const s = rawServer(['--state-dir', mkdtempSync(join(tmpdir(), 'sbx-e2e-real-'))]);
  s.send(INIT(1));
  await s.waitFor((m) => m.id === 1);
  s.send('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"d.txt","content":"0123456789"}}}\n');
  await s.waitFor((m) => m.id === 2, 30000);
  s.send('{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"d.txt","offset":5.0,"length":2.0}}}\n');
  const r = await s.waitFor((m) => m.id === 3, 30000);
  assert.equal(r.result.structuredContent.content, '56');
  s.send('{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"d.txt","offset":5.5}}}\n');
  const bad = await s.waitFor((m) => m.id === 4, 30000);
  assert.equal(bad.result.isError, true);
  assert.match(bad.result.content[0].text, /offset.*expected integer/);
  s.child.stdin.end();
  await s.exited;
});

test('raw: a message over the size cap is refused and the stream stays in sync', async () => {
  const s = rawServer(['--max-message-bytes', '4k']);
  s.send(INIT(1));
  await s.waitFor((m) => m.id === 1);
  s.send('{"jsonrpc":"2.0","id":2,"method":"ping","params":{"pad":"' + 'x'.repeat(100000) + '"}}\n');
  const err = await s.waitFor((m) => m.error && /size limit/.test(m.error.message));
  assert.equal(err.error.code, -32600);
  // The answer carries the request's id, so the client is not left waiting: first or last
  // (the TypeScript SDK writes it last). A nested "id" is not taken for it.
  assert.equal(err.id, 2);
  s.send('{"method":"ping","params":{"pad":"' + 'x'.repeat(100000) + '"},"jsonrpc":"2.0","id":"late-4"}\n');
  const late = await s.waitFor((m) => m.error && m.id === 'late-4');
  assert.match(late.error.message, /size limit/);
  s.send('{"method":"ping","params":{"id":7,"pad":"' + 'x'.repeat(100000) + '","q":{"id":8}}}\n');
  const nested = await s.waitFor((m) => m.error && /size limit/.test(m.error.message) && m !== err && m !== late);
  assert.equal(nested.id, null);
  s.send('{"jsonrpc":"2.0","id":3,"method":"ping"}\n');
  assert.deepEqual((await s.waitFor((m) => m.id === 3)).result, {});
  s.child.stdin.end();
  await s.exited;
});

test('raw: blank lines and a byte order mark are skipped; a CRLF line may fill the cap; cursors and ids are strict', async () => {
  const s = rawServer(['--max-message-bytes', '4k', '--test-fixtures']);
  s.send('\uFEFF' + INIT(1));
  await s.waitFor((m) => m.id === 1);
  s.send('   \n\t\n \r\n');
  const exact = '{"jsonrpc":"2.0","id":2,"method":"ping","params":{"pad":"';
  s.send(exact + 'x'.repeat(4096 - exact.length - 3) + '"}}\r\n');
  assert.deepEqual((await s.waitFor((m) => m.id === 2)).result, {}, 'a 4096-byte message ending in CRLF');
  for (const [i, cursor] of [[3, 'o 1'], [4, 'o+1'], [5, 'o-1']]) {
    s.send(JSON.stringify({ jsonrpc: '2.0', id: i, method: 'tools/list', params: { cursor } }) + '\n');
    assert.equal((await s.waitFor((m) => m.id === i)).error.code, -32602, cursor);
  }
  s.send('{"jsonrpc":"2.0","id":"dup","method":"tools/call","params":{"name":"test_slow","arguments":{"ms":3000}}}\n');
  s.send('{"jsonrpc":"2.0","id":"dup","method":"tools/call","params":{"name":"test_slow","arguments":{"ms":10}}}\n');
  const first = await s.waitFor((m) => m.id === 'dup');
  assert.match(first.error.message, /still in flight/);
  s.send('{"jsonrpc":"2.0","id":"dup","method":"ping"}\n');
  const ping = await s.waitFor((m) => m.id === 'dup' && m !== first);
  assert.match(ping.error.message, /still in flight/, 'any method, not only tools/call');
  await s.waitFor((m) => m.id === 'dup' && m.result, 5000);
  assert.equal(s.replies.filter((m) => m.error && m.id === null).length, 0, 'nothing answered with id null');
  s.child.stdin.end();
  await s.exited;
});

test('SDK: bad tool arguments are an isError result naming the argument', async () => {
  const { client } = await connect();
  const r = await client.callTool({ name: 'test_slow', arguments: { ms: 'soon' } });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /'ms': expected integer, got string/);
  const r2 = await client.callTool({ name: 'test_slow', arguments: { ms: 1, extra: 1 } });
  assert.equal(r2.isError, true);
  assert.match(r2.content[0].text, /'extra': is not a known argument/);
  const r3 = await client.callTool({ name: 'test_slow', arguments: {} });
  assert.match(r3.content[0].text, /'ms': is required/);
  await client.close();
});

test('SDK: progress notifications arrive for a call with a progress token', async () => {
  const { client } = await connect();
  const seen = [];
  const r = await client.callTool({ name: 'test_slow', arguments: { ms: 300, steps: 3 } }, undefined, {
    onprogress: (p) => seen.push(p.progress),
  });
  assert.equal(r.content[0].text, 'done');
  // The SDK may run the last progress handler after resolving the result; the wire order is
  // checked by the raw test below.
  assert.deepEqual(seen.slice(0, 2), [1, 2]);
  await client.close();
});

test('raw: every progress notification precedes the response, increasing', async () => {
  const s = rawServer(['--test-fixtures']);
  s.send(INIT(1));
  await s.waitFor((m) => m.id === 1);
  s.send('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_slow","arguments":{"ms":60,"steps":3},"_meta":{"progressToken":"tok"}}}\n');
  await s.waitFor((m) => m.id === 2);
  const seq = s.replies.filter((m) => m.method === 'notifications/progress' || m.id === 2);
  assert.deepEqual(seq.map((m) => (m.id === 2 ? 'result' : m.params.progress)), [1, 2, 3, 'result']);
  assert.ok(seq.slice(0, 3).every((m) => m.params.progressToken === 'tok' && m.params.total === 3));
  s.child.stdin.end();
  await s.exited;
});

test('SDK: a concurrent ping is answered while a slow call runs', async () => {
  const { client } = await connect();
  const slow = client.callTool({ name: 'test_slow', arguments: { ms: 3000 } });
  const t0 = Date.now();
  await client.ping();
  const pingMs = Date.now() - t0;
  assert.ok(pingMs < 1000, `ping took ${pingMs} ms`);
  const t1 = Date.now();
  const other = await client.callTool({ name: 'test_slow', arguments: { ms: 10 } });
  assert.equal(other.content[0].text, 'done');
  assert.ok(Date.now() - t1 < 1000);
  await slow;
  await client.close();
});

test('raw: cancellation stops the work and sends no response', async () => {
  const s = rawServer(['--test-fixtures']);
  s.send(INIT(1));
  await s.waitFor((m) => m.id === 1);
  s.send('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_slow","arguments":{"ms":500}}}\n');
  s.send('{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"test"}}\n');
  s.send('{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":12345}}\n');
  await new Promise((r) => setTimeout(r, 900));
  assert.equal(s.replies.filter((m) => m.id === 2).length, 0);
  s.send('{"jsonrpc":"2.0","id":3,"method":"ping"}\n');
  await s.waitFor((m) => m.id === 3);
  s.child.stdin.end();
  assert.equal((await s.exited).code, 0);
});

test('SDK: logging/setLevel filters notifications/message', async () => {
  const { client } = await connect();
  const got = [];
  const { LoggingMessageNotificationSchema } = await import('@modelcontextprotocol/sdk/types.js');
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => got.push(n.params.level));
  await client.setLoggingLevel('warning');
  await client.callTool({ name: 'test_log', arguments: {} });
  assert.deepEqual(got, ['warning', 'error', 'critical', 'alert', 'emergency']);
  got.length = 0;
  await client.setLoggingLevel('debug');
  await client.callTool({ name: 'test_log', arguments: {} });
  assert.equal(got.length, 8);
  await client.close();
});

for (const sig of ['SIGTERM', 'SIGHUP']) {
  test(`raw: ${sig} shuts down cleanly`, async () => {
    const s = rawServer(['--test-fixtures']);
    s.send(INIT(1));
    await s.waitFor((m) => m.id === 1);
    s.send('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_slow","arguments":{"ms":10000}}}\n');
    await new Promise((r) => setTimeout(r, 100));
    s.child.kill(sig);
    const { code } = await s.exited;
    assert.equal(code, 0);
  });
}

test('raw: under nohup (SIGHUP ignored when it started) SIGHUP does not end the server', async () => {
  const child = spawn('nohup', [BIN, 'serve', '--stdio', '--log-level', 'error'], { stdio: ['pipe', 'pipe', 'ignore'] });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  const exited = new Promise((res) => child.on('exit', (code) => res(code)));
  const answered = async (id) => {
    for (let i = 0; i < 100 && !out.includes(`"id":${id},`); i++) await new Promise((r) => setTimeout(r, 50));
    return out.includes(`"id":${id},`);
  };
  child.stdin.write(INIT(1));
  assert.ok(await answered(1));
  child.kill('SIGHUP');
  await new Promise((r) => setTimeout(r, 300));
  child.stdin.write('{"jsonrpc":"2.0","id":2,"method":"ping"}\n');
  assert.ok(await answered(2), out);
  child.kill('SIGTERM');
  assert.equal(await exited, 0);
});

test('stdin redirected from a file or /dev/null is read (epoll refuses both)', () => {
  const state = mkdtempSync(join(tmpdir(), 'sbx-e2e-filein-'));
  const input = join(state, 'in.jsonl');
  writeFileSync(input, INIT(1) + '{"jsonrpc":"2.0","id":2,"method":"ping"}\n');
  for (const path of [input, '/dev/null']) {
    const fd = openSync(path, 'r');
    const r = spawnSync(BIN, ['serve', '--stdio', '--log-level', 'error', '--state-dir', state],
      { stdio: [fd, 'pipe', 'pipe'], encoding: 'utf8', timeout: 20000 });
    closeSync(fd);
    assert.equal(r.status, 0, `${path}: ${r.stderr}`);
    if (path === input) {
      const ids = r.stdout.trim().split('\n').map((l) => JSON.parse(l).id);
      assert.deepEqual(ids, [1, 2], r.stdout);
    }
  }
});

test('--max-message-bytes is held to server.max_message_bytes\'s range, not only its minimum', () => {
  const state = mkdtempSync(join(tmpdir(), 'sbx-e2e-maxmsg-'));
  for (const [size, want] of [['2G', /between 1024 and 1073741824/], ['512', /between 1024 and/], ['lots', /not a size/]]) {
    const r = spawnSync(BIN, ['serve', '--stdio', '--max-message-bytes', size, '--state-dir', state],
      { input: '', encoding: 'utf8', timeout: 20000 });
    assert.equal(r.status, 2, `${size}: ${r.stderr}`);
    assert.match(r.stderr, want);
  }
});

test('raw: a request the parser or the size cap refuses is answered under the id its ends show', async () => {
  const s = rawServer(['--max-message-bytes', '1k']);
  s.send(INIT(1));
  await s.waitFor((m) => m.id === 1);
  // A lone surrogate (what JSON.stringify makes of half an emoji) and a number past double's
  // range are refused by both parses; a line of exactly the cap plus one byte by the cap.
  s.send('{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"print(\'\\ud83d\')"}}}\n');
  s.send('{"jsonrpc":"2.0","id":43,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"1","timeout_s":1e400}}}\n');
  const head = '{"jsonrpc":"2.0","id":7,"method":"ping","params":{"pad":"';
  s.send(head + 'x'.repeat(1025 - head.length - 3) + '"}}\n');
  for (const [id, code] of [[42, -32700], [43, -32700], [7, -32600]]) {
    const m = await s.waitFor((r) => r.id === id);
    assert.equal(m.error.code, code, JSON.stringify(m));
  }
  assert.ok(!s.replies.some((m) => m.id === null), JSON.stringify(s.replies));
  s.child.stdin.end();
  await s.exited;
});

test('raw: an oversized last line without its newline is still answered when stdin ends', async () => {
  const s = rawServer(['--max-message-bytes', '1k']);
  s.send(INIT(1));
  await s.waitFor((m) => m.id === 1);
  // The line under the cap is answered at EOF; the one over it must be too, not dropped.
  s.send('{"jsonrpc":"2.0","id":9,"method":"ping","params":{"pad":"' + 'x'.repeat(3000) + '"}}');
  s.child.stdin.end();
  const m = await s.waitFor((r) => r.id === 9);
  assert.equal(m.error.code, -32600, JSON.stringify(m));
  assert.equal((await s.exited).code, 0);
});

test('SDK: sampling/createMessage goes to a client that declared sampling, answer matched', async () => {
  const { CreateMessageRequestSchema, ElicitRequestSchema } = await import('@modelcontextprotocol/sdk/types.js');
  const { client } = await connect(['--test-fixtures'], { capabilities: { sampling: {}, elicitation: {} } });
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    assert.equal(req.params.messages[0].content.text, 'say hi');
    return { model: 'test-model', role: 'assistant', content: { type: 'text', text: 'hi from the client' } };
  });
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    assert.equal(req.params.message, 'who are you?');
    return { action: 'accept', content: { username: 'ada' } };
  });
  const r = await client.callTool({ name: 'test_sampling', arguments: { prompt: 'say hi' } });
  assert.notEqual(r.isError, true);
  assert.match(r.content[0].text, /hi from the client/);
  const e = await client.callTool({ name: 'test_elicitation', arguments: { message: 'who are you?' } });
  assert.match(e.content[0].text, /"action":"accept"/);
  assert.match(e.content[0].text, /"username":"ada"/);
  await client.close();
});

test('SDK: no server-to-client request without the capability', async () => {
  const { client } = await connect();
  const r = await client.callTool({ name: 'test_sampling', arguments: { prompt: 'x' } });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /did not declare the 'sampling' capability/);
  await client.close();
});

test('raw: a client error answer to sampling, or a result that is no object, becomes a tool error; stray responses are ignored', async () => {
  const s = rawServer(['--test-fixtures']);
  s.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: { sampling: {} }, clientInfo: { name: 'raw', version: '1' } } }) + '\n');
  await s.waitFor((m) => m.id === 1);
  s.send('{"jsonrpc":"2.0","id":"nobody-asked","result":{}}\n');
  s.send('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_sampling","arguments":{"prompt":"p"}}}\n');
  const req = await s.waitFor((m) => m.method === 'sampling/createMessage');
  s.send(JSON.stringify({ jsonrpc: '2.0', id: req.id, error: { code: -1, message: 'user declined' } }) + '\n');
  const r = await s.waitFor((m) => m.id === 2);
  assert.equal(r.result.isError, true);
  assert.match(r.result.content[0].text, /user declined/);
  // A result that is not an object answers no MCP request: the tool hears so, not silence.
  const asked = new Set([req.id]);
  for (const [i, result] of [5, null].entries()) {
    s.send(JSON.stringify({ jsonrpc: '2.0', id: 3 + i, method: 'tools/call', params: { name: 'test_sampling', arguments: { prompt: 'p' } } }) + '\n');
    const again = await s.waitFor((m) => m.method === 'sampling/createMessage' && !asked.has(m.id));
    asked.add(again.id);
    s.send(JSON.stringify({ jsonrpc: '2.0', id: again.id, result }) + '\n');
    const bad = await s.waitFor((m) => m.id === 3 + i);
    assert.equal(bad.result.isError, true);
    assert.match(bad.result.content[0].text, new RegExp(`response to sampling/createMessage carried a result of type ${result === null ? 'null' : 'integer'}, not an object`));
  }
  // Nor does one without "jsonrpc": "2.0", or with neither a result nor an error: each left
  // its tool call waiting for ever before, and the second was answered with an error under
  // the server's own request id.
  for (const [i, answer, why] of [
    [5, (id) => ({ id, result: { role: 'assistant', content: { type: 'text', text: 'ok' }, model: 'm' } }), /lacks "jsonrpc": "2.0"/],
    [6, (id) => ({ jsonrpc: '2.0', id }), /has neither a result nor an error/],
  ]) {
    s.send(JSON.stringify({ jsonrpc: '2.0', id: i, method: 'tools/call', params: { name: 'test_sampling', arguments: { prompt: 'p' } } }) + '\n');
    const again = await s.waitFor((m) => m.method === 'sampling/createMessage' && !asked.has(m.id));
    asked.add(again.id);
    s.send(JSON.stringify(answer(again.id)) + '\n');
    const bad = await s.waitFor((m) => m.id === i);
    assert.equal(bad.result.isError, true);
    assert.match(bad.result.content[0].text, why);
    assert.equal(s.replies.filter((m) => m.id === again.id && !m.method).length, 0, 'a response is never answered');
  }
  s.child.stdin.end();
  assert.equal((await s.exited).code, 0);
});

test('raw: a tool call cancelled while it waits on sampling has the sampling request cancelled to the client; a late answer is ignored', async () => {
  const s = rawServer(['--test-fixtures']);
  s.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: { sampling: {} }, clientInfo: { name: 'raw', version: '1' } } }) + '\n');
  await s.waitFor((m) => m.id === 1);
  s.send('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_sampling","arguments":{"prompt":"p"}}}\n');
  const req = await s.waitFor((m) => m.method === 'sampling/createMessage');
  s.send('{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"user stopped it"}}\n');
  const cancel = await s.waitFor((m) => m.method === 'notifications/cancelled');
  assert.deepEqual(cancel.params, { requestId: req.id, reason: 'the tool call that asked was cancelled' });
  s.send(JSON.stringify({ jsonrpc: '2.0', id: req.id, result: { role: 'assistant', content: { type: 'text', text: 'late' }, model: 'm' } }) + '\n');
  s.send('{"jsonrpc":"2.0","id":3,"method":"ping"}\n');
  await s.waitFor((m) => m.id === 3);
  assert.equal(s.replies.filter((m) => m.id === 2 || (m.id === req.id && !m.method)).length, 0, 'neither the cancelled call nor the late answer is answered');
  // A call that is not cancelled tells the client nothing of the kind.
  s.send('{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"test_sampling","arguments":{"prompt":"p"}}}\n');
  const req2 = await s.waitFor((m) => m.method === 'sampling/createMessage' && m.id !== req.id);
  s.send(JSON.stringify({ jsonrpc: '2.0', id: req2.id, result: { role: 'assistant', content: { type: 'text', text: 'ok' }, model: 'm' } }) + '\n');
  assert.equal((await s.waitFor((m) => m.id === 4)).result.isError, undefined);
  assert.equal(s.replies.filter((m) => m.method === 'notifications/cancelled').length, 1);
  s.child.stdin.end();
  assert.equal((await s.exited).code, 0);
});

test('raw: a response over the size cap, or unparsable, fails the request it answers, rather than leaving its tool waiting', async () => {
  const s = rawServer(['--test-fixtures', '--max-message-bytes', '1024']);
  s.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: { sampling: {} }, clientInfo: { name: 'raw', version: '1' } } }) + '\n');
  await s.waitFor((m) => m.id === 1);
  s.send('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_sampling","arguments":{"prompt":"p"}}}\n');
  const req = await s.waitFor((m) => m.method === 'sampling/createMessage');
  const text = 'x'.repeat(2000);
  s.send(JSON.stringify({ jsonrpc: '2.0', id: req.id, result: { role: 'assistant', content: { type: 'text', text }, model: 'm' } }) + '\n');
  const r = await s.waitFor((m) => m.id === 2, 3000);
  assert.equal(r.result.isError, true);
  assert.match(r.result.content[0].text, /exceeds the size limit/);
  assert.equal(s.replies.filter((m) => m.id === req.id && !m.method).length, 0, 'a response is never answered');
  // So does one that cannot be parsed (bytes that are not UTF-8).
  s.send('{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"test_sampling","arguments":{"prompt":"p"}}}\n');
  const req2 = await s.waitFor((m) => m.method === 'sampling/createMessage' && m.id !== req.id);
  s.child.stdin.write(Buffer.concat([Buffer.from(`{"jsonrpc":"2.0","id":"${req2.id}","result":{"model":"`), Buffer.from([0xff]), Buffer.from('"}}\n')]));
  const r2 = await s.waitFor((m) => m.id === 3, 3000);
  assert.equal(r2.result.isError, true);
  assert.match(r2.result.content[0].text, /could not be read: parse error: invalid UTF-8/);
  assert.equal(s.replies.filter((m) => m.id === req2.id && !m.method).length, 0, 'a response is never answered');
  s.child.stdin.end();
  await s.exited;
});

test('SDK: conformance fixtures test_simple_text and test_error_handling answer like the reference', async () => {
  const { client } = await connect();
  const ok = await client.callTool({ name: 'test_simple_text', arguments: {} });
  assert.deepEqual(ok.content, [{ type: 'text', text: 'This is a simple text response for testing.' }]);
  assert.notEqual(ok.isError, true);
  const bad = await client.callTool({ name: 'test_error_handling', arguments: {} });
  assert.equal(bad.isError, true);
  assert.equal(bad.content[0].text, 'This tool intentionally returns an error for testing');
  await client.close();
});

test('SDK: resources, templates and prompts registered as data', async () => {
  const { client } = await connect();
  const { resources } = await client.listResources();
  assert.deepEqual(resources.map((r) => r.uri).sort(), ['test://static-binary', 'test://static-text']);
  const text = await client.readResource({ uri: 'test://static-text' });
  assert.equal(text.contents[0].mimeType, 'text/plain');
  assert.match(text.contents[0].text, /static text resource/);
  const bin = await client.readResource({ uri: 'test://static-binary' });
  assert.equal(Buffer.from(bin.contents[0].blob, 'base64').subarray(1, 4).toString(), 'PNG');
  const { resourceTemplates } = await client.listResourceTemplates();
  assert.equal(resourceTemplates[0].uriTemplate, 'test://template/{id}/data');
  const t = await client.readResource({ uri: 'test://template/abc-1/data' });
  assert.equal(JSON.parse(t.contents[0].text).id, 'abc-1');
  await assert.rejects(client.readResource({ uri: 'test://template/a b/data' }), /-32002/);
  await assert.rejects(client.readResource({ uri: 'test://nothing' }), /-32002/);
  const { prompts } = await client.listPrompts();
  assert.ok(prompts.some((p) => p.name === 'test_prompt_with_arguments' && p.arguments.length === 2));
  const g = await client.getPrompt({ name: 'test_prompt_with_arguments', arguments: { arg1: 'x', arg2: 'y' } });
  assert.match(g.messages[0].content.text, /arg1='x', arg2='y'/);
  await assert.rejects(client.getPrompt({ name: 'test_prompt_with_arguments', arguments: { arg1: 'x' } }), /-32602.*arg2/);
  await assert.rejects(client.getPrompt({ name: 'nope' }), /-32602/);
  // Completion: nothing to offer for a real prompt or template; a reference to nothing, or no
  // argument, is refused.
  const none = await client.complete({ ref: { type: 'ref/prompt', name: 'test_prompt_with_arguments' }, argument: { name: 'arg1', value: 'a' } });
  assert.deepEqual(none.completion.values, []);
  const tmpl = await client.complete({ ref: { type: 'ref/resource', uri: 'test://template/{id}/data' }, argument: { name: 'id', value: 'a' } });
  assert.deepEqual(tmpl.completion.values, []);
  await assert.rejects(client.complete({ ref: { type: 'ref/prompt', name: 'nope' }, argument: { name: 'a', value: 'b' } }), /-32602/);
  await assert.rejects(client.complete({ ref: { type: 'ref/resource', uri: 'test://nothing/{x}' }, argument: { name: 'x', value: 'b' } }), /-32602/);
  await assert.rejects(client.request({ method: 'completion/complete', params: { ref: { type: 'ref/prompt', name: 'test_prompt_with_arguments' } } }, CompleteResultSchema), /-32602/);
  await client.close();
});

test('raw: stdin EOF ends the server cleanly with a call in flight', async () => {
  const s = rawServer(['--test-fixtures']);
  s.send(INIT(1));
  await s.waitFor((m) => m.id === 1);
  s.send('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_slow","arguments":{"ms":10000}}}\n');
  s.child.stdin.end();
  const t0 = Date.now();
  const { code } = await s.exited;
  assert.equal(code, 0);
  assert.ok(Date.now() - t0 < 2000, 'exit did not wait for the call');
});

test('raw: a client that closed the server\'s stdout ends the server, as stdin\'s end does', async () => {
  const s = rawServer(['--test-fixtures']);
  s.send(INIT(1));
  await s.waitFor((m) => m.id === 1);
  s.send('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_slow","arguments":{"ms":20000}}}\n');
  s.child.stdout.destroy();
  await new Promise((res) => setTimeout(res, 200));
  // The answer to this ping has nowhere to go: before, the server ran on until stdin closed.
  s.send('{"jsonrpc":"2.0","id":3,"method":"ping"}\n');
  const { code } = await Promise.race([s.exited, new Promise((_, rej) =>
    setTimeout(() => rej(new Error('the server ran on with nobody to answer')), 3000))]);
  assert.equal(code, 0);
});
