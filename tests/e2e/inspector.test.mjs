// The official inspector CLI against the binary over stdio: it must list and call tools.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { BIN } from './helpers.mjs';

const run = promisify(execFile);
const CLI = new URL('./node_modules/.bin/mcp-inspector-cli', import.meta.url).pathname;

async function inspector(...args) {
  const { stdout } = await run(process.execPath, [CLI, '--cli', BIN, 'serve', '--stdio', '--test-fixtures', ...args], { timeout: 60000 });
  return JSON.parse(stdout);
}

test('inspector CLI: tools/list over stdio', async () => {
  const out = await inspector('--method', 'tools/list');
  assert.deepEqual(out.tools.map((t) => t.name).sort(), ['test_elicitation', 'test_error', 'test_error_handling', 'test_log', 'test_sampling', 'test_simple_text', 'test_slow']);
});

test('inspector CLI: tools/call over stdio', async () => {
  const out = await inspector('--method', 'tools/call', '--tool-name', 'test_slow', '--tool-arg', 'ms=10');
  assert.equal(out.content[0].text, 'done');
});
