// Bounded load over Streamable HTTP on loopback (not part of the e2e tier: it runs for minutes).
//   tests/e2e/node_modules/.bin/node22 tests/e2e/http-load.mjs [sessions=200] [seconds=60] [rounds=2]
// Starts the server (SBX_TEST_BIN or build/mcp-sandbox) with room for one sandbox per session,
// opens N SDK sessions, each calling run_code in a loop, then DELETEs them all; per round it
// prints one JSON line: calls, errors, latency quantiles and the server's RSS at each stage,
// so that a leak shows as RSS climbing from round to round.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { BIN } from './helpers.mjs';

const [n = 200, secs = 60, rounds = 2] = process.argv.slice(2).map(Number);
const dir = mkdtempSync(join(tmpdir(), 'sbx-http-load-'));
writeFileSync(join(dir, 'load.toml'), `[limits]\nmax_sandboxes = ${n + 16}\n\n[http]\nmax_sessions = ${n + 16}\n`);
const server = spawn(BIN, ['serve', '--http', '127.0.0.1:0', '--state-dir', join(dir, 'state'),
  '--config', join(dir, 'load.toml')], { stdio: ['ignore', 'ignore', 'pipe'] });
const url = await new Promise((resolve, reject) => {
  let err = '';
  server.stderr.on('data', (d) => {
    err += d;
    const m = err.match(/"msg":"http listening".*?"port":"(\d+)"/);
    if (m) resolve(`http://127.0.0.1:${m[1]}/mcp`);
  });
  server.on('exit', (code) => reject(new Error(`server exited ${code}: ${err}`)));
});
const rss = () => Number(readFileSync(`/proc/${server.pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)[1]);

async function round(i) {
  const out = { round: i, sessions: n, secs, rss_kb_start: rss() };
  const clients = [];
  for (let k = 0; k < n; k++) {
    const c = new Client({ name: `load${k}`, version: '1' });
    await c.connect(new StreamableHTTPClientTransport(new URL(url)));
    clients.push(c);
  }
  out.rss_kb_connected = rss();
  let ok = 0, errors = 0;
  const lat = [];
  const end = Date.now() + secs * 1000;
  await Promise.all(clients.map(async (c) => {
    while (Date.now() < end) {
      const t0 = performance.now();
      try {
        const r = await c.callTool({ name: 'run_code', arguments: { code: 'x = sum(range(1000)); x' } });
        if (r.isError || r.structuredContent?.result !== '499500') errors++; else ok++;
      } catch (e) {
        if (errors++ < 3) console.error(String(e));
      }
      lat.push(performance.now() - t0);
    }
  }));
  out.rss_kb_loaded = rss();
  await Promise.all(clients.map(async (c) => { await c.transport.terminateSession(); await c.close(); }));
  await new Promise((r) => setTimeout(r, 1000));
  lat.sort((a, b) => a - b);
  const q = (p) => Number(lat[Math.floor(p * (lat.length - 1))].toFixed(1));
  Object.assign(out, { calls_ok: ok, errors, calls_per_s: Math.round(ok / secs), p50_ms: q(0.5), p99_ms: q(0.99), rss_kb_after_delete: rss() });
  console.log(JSON.stringify(out));
  return errors;
}

let failed = 0;
try {
  for (let i = 1; i <= rounds; i++) failed += await round(i);
} finally {
  server.kill('SIGTERM');
  await new Promise((r) => server.on('exit', r));
  rmSync(dir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
