// The official inspector CLI against the binary over stdio: it must list and call tools.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN, SANITIZER_ENV, track } from './helpers.mjs';

const stateDir = mkdtempSync(join(tmpdir(), 'sbx-inspector-'));
after(() => rmSync(stateDir, { recursive: true, force: true }));

const run = promisify(execFile);
const CLI = new URL('./node_modules/.bin/mcp-inspector-cli', import.meta.url).pathname;

async function inspector(...args) {
  // The CLI, like the SDK, hands its server few variables: the sanitizers' go with -e.
  const env = Object.entries(SANITIZER_ENV).flatMap(([k, v]) => ['-e', `${k}=${v}`]);
  const { stdout } = await run(process.execPath, [CLI, '--cli', ...env, BIN, 'serve', '--stdio', '--test-fixtures', '--state-dir', stateDir, ...args], { timeout: 60000 });
  return JSON.parse(stdout);
}

test('inspector CLI: tools/list over stdio', async () => {
  const out = await inspector('--method', 'tools/list');
  const names = out.tools.map((t) => t.name);
  for (const n of ['test_elicitation', 'test_error', 'test_error_handling', 'test_log', 'test_sampling',
    'test_simple_text', 'test_slow', 'run_code', 'execute_command', 'create_sandbox', 'read_file']) {
    assert.ok(names.includes(n), `${n} is listed`);
  }
});

test('inspector CLI: run_code in a real sandbox over stdio', async () => {
  const out = await inspector('--method', 'tools/call', '--tool-name', 'run_code', '--tool-arg', 'code=print(6*7)');
  assert.equal(out.structuredContent.stdout, '42\n');
  assert.equal(out.structuredContent.success, true);
});

test('inspector CLI: tools/call over stdio', async () => {
  const out = await inspector('--method', 'tools/call', '--tool-name', 'test_slow', '--tool-arg', 'ms=10');
  assert.equal(out.content[0].text, 'done');
});

test('inspector CLI: run_code over --transport http', async () => {
  const { spawn } = await import('node:child_process');
  const child = track(spawn(BIN, ['serve', '--http', '127.0.0.1:0', '--state-dir', stateDir], { stdio: ['ignore', 'ignore', 'pipe'] }));
  try {
    const port = await new Promise((resolve, reject) => {
      let err = '';
      child.stderr.on('data', (d) => {
        err += d;
        const m = err.match(/"msg":"http listening".*?"port":"(\d+)"/);
        if (m) resolve(m[1]);
      });
      child.on('exit', (code) => reject(new Error(`server exited ${code}: ${err}`)));
    });
    const { stdout } = await run(process.execPath, [CLI, '--cli', `http://127.0.0.1:${port}/mcp`, '--transport', 'http',
      '--method', 'tools/call', '--tool-name', 'run_code', '--tool-arg', 'code=print(6*7)'], { timeout: 60000 });
    assert.equal(JSON.parse(stdout).structuredContent.stdout, '42\n');
  } finally {
    child.kill('SIGTERM');
  }
});
