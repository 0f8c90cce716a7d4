// Shared helpers: start the real binary, talk to it with the official SDK or raw lines.
import { spawn } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

export const BIN = process.env.SBX_TEST_BIN || new URL('../../build/mcp-sandbox', import.meta.url).pathname;

// A server spawned by a test file ends with that file's process, even when the runner kills it
// for a timeout: an HTTP server has no stdin to see closing, and one left running would slow
// every later tier.
const children = new Set();
export function track(child) {
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}
function endChildren() {
  for (const c of children) {
    try { c.kill('SIGTERM'); } catch { /* already gone */ }
  }
}
process.once('exit', endChildren);
for (const [sig, n] of [['SIGTERM', 15], ['SIGINT', 2]]) {
  process.once(sig, () => { endChildren(); process.exit(128 + n); });
}

// Everything started here is ended after the file's tests, even when a test failed midway.
const started = [];
export async function cleanup() {
  for (const x of started.splice(0)) {
    try { if (x.close) await x.close(); else x.kill('SIGKILL'); } catch { /* already gone */ }
  }
}

// The SDK hands the server it starts only a few variables (HOME, PATH, ...): the sanitizers'
// settings must reach it as well, or its reports go where nobody looks (tests/tiers/e2e.sh).
export const SANITIZER_ENV = Object.fromEntries(['ASAN_OPTIONS', 'UBSAN_OPTIONS', 'LSAN_OPTIONS']
  .filter((k) => process.env[k] !== undefined).map((k) => [k, process.env[k]]));

// prefix: a command that runs the server, such as unshare with its options.
export async function connect(extraArgs = ['--test-fixtures'], clientOpts = {}, prefix = []) {
  const [command, ...before] = [...prefix, BIN];
  const transport = new StdioClientTransport({
    command,
    args: [...before, 'serve', '--stdio', '--log-level', 'warning', ...extraArgs],
    stderr: 'pipe',
    env: SANITIZER_ENV,
  });
  const client = new Client({ name: 'mcp-sandbox-e2e', version: '1.0.0' }, clientOpts);
  await client.connect(transport);
  started.push(client);
  return { client, transport };
}

// Raw line session: send lines, collect parsed replies.
export function rawServer(extraArgs = []) {
  const child = track(spawn(BIN, ['serve', '--stdio', '--log-level', 'error', ...extraArgs], {
    stdio: ['pipe', 'pipe', 'pipe'],
  }));
  started.push(child);
  const replies = [];
  const waiters = [];
  let buf = '';
  child.stdout.on('data', (d) => {
    buf += d.toString('utf8');
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      const msg = JSON.parse(line); // every stdout line must be JSON
      replies.push(msg);
      for (const w of waiters.splice(0)) w();
    }
  });
  const exited = new Promise((res) => child.on('exit', (code, sig) => res({ code, sig })));
  return {
    child,
    replies,
    exited,
    send(text) { child.stdin.write(text); },
    async waitFor(pred, ms = 5000) {
      const deadline = Date.now() + ms;
      for (;;) {
        const m = replies.find(pred);
        if (m) return m;
        if (Date.now() > deadline) throw new Error('timed out waiting; got ' + JSON.stringify(replies));
        await new Promise((r) => { waiters.push(r); setTimeout(r, 50); });
      }
    },
  };
}

export const INIT = (id, version = '2025-11-25') => JSON.stringify({
  jsonrpc: '2.0', id, method: 'initialize',
  params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
}) + '\n';

// `serve --http` on a free port (loopback unless `listen` says otherwise); resolves once the
// server logs where it listens. Stopped by stopHttp() with SIGTERM, so that it removes its
// cgroups on the way out.
const httpServers = [];
export function startHttp(stateDir, extra = [], listen = '127.0.0.1:0') {
  const child = track(spawn(BIN, ['serve', '--http', listen, '--state-dir', stateDir, ...extra],
    { stdio: ['ignore', 'ignore', 'pipe'] }));
  httpServers.push(child);
  return new Promise((resolve, reject) => {
    let log = '';
    child.stderr.on('data', (d) => {
      log += d;
      const m = log.match(/"msg":"http listening".*?"port":"(\d+)"/);
      if (m) resolve({ child, port: Number(m[1]), url: `http://127.0.0.1:${m[1]}/mcp`, log: () => log });
    });
    child.on('close', (code) => reject(new Error(`server exited ${code}: ${log}`)));
  });
}

export async function stopHttp() {
  await Promise.all(httpServers.splice(0).map((c) => new Promise((res) => {
    if (c.exitCode !== null || c.signalCode !== null) return res();
    c.once('exit', res);
    c.kill('SIGTERM');
  })));
}
