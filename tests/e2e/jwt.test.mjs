// JWT access tokens over Streamable HTTP: keys made here with node:crypto, their public halves
// written as a JWKS file, tokens signed by hand; the real binary checks them.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync, sign } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync, chmodSync, renameSync, readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, request as httpRequest } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startHttp, stopHttp } from './helpers.mjs';

const dir = mkdtempSync(join(tmpdir(), 'sbx-e2e-jwt-'));
chmodSync(dir, 0o755);
const state = join(dir, 'state');
after(async () => {
  await stopHttp();
  rmSync(dir, { recursive: true, force: true });
});

const ISSUER = 'https://login.example.test';
const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const stranger = generateKeyPairSync('rsa', { modulusLength: 2048 });
const ed = generateKeyPairSync('ed25519');
const edStranger = generateKeyPairSync('ed25519');
const jwks = {
  keys: [
    { ...rsa.publicKey.export({ format: 'jwk' }), kid: 'rsa-1', alg: 'RS256', use: 'sig' },
    { ...ec.publicKey.export({ format: 'jwk' }), kid: 'ec-1' },
    { ...ed.publicKey.export({ format: 'jwk' }), kid: 'ed-1', alg: 'EdDSA' },
  ],
};
const jwksFile = join(dir, 'jwks.json');
writeFileSync(jwksFile, JSON.stringify(jwks));
const config = join(dir, 'jwt.toml');
writeFileSync(config, `[http]\njwt_jwks_file = "${jwksFile}"\njwt_issuer = "${ISSUER}"\n` +
  'jwt_algorithms = ["RS256", "ES256", "EdDSA"]\n');

const b64u = (x) => Buffer.from(x).toString('base64url');
// A compact JWS: RS256 (PKCS#1 v1.5), ES256 (r||s, as JWS wants, not DER) or EdDSA (Ed25519).
const KIDS = { RS256: 'rsa-1', ES256: 'ec-1', EdDSA: 'ed-1' };
const KEYS = { RS256: rsa.privateKey, ES256: ec.privateKey, EdDSA: ed.privateKey };
// kid: null leaves it out.
function jwt(claims, { alg = 'RS256', kid = KIDS[alg], key } = {}) {
  const header = { alg, typ: 'at+jwt', ...(kid === null ? {} : { kid }) };
  const input = `${b64u(JSON.stringify(header))}.${b64u(JSON.stringify(claims))}`;
  const k = key || KEYS[alg];
  const sig = alg === 'EdDSA' ? sign(null, Buffer.from(input), k)
    : sign('sha256', Buffer.from(input), alg === 'ES256' ? { key: k, dsaEncoding: 'ieee-p1363' } : k);
  return `${input}.${b64u(sig)}`;
}
const now = () => Math.floor(Date.now() / 1000);
const claimsFor = (sub, aud, extra = {}) => ({ iss: ISSUER, aud, sub, iat: now(), exp: now() + 600, ...extra });

const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };
const post = (url, body, headers = {}) => fetch(url, {
  method: 'POST',
  headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers },
  body: JSON.stringify(body),
});

async function sdkClient(url, token) {
  const client = new Client({ name: 'e2e-jwt', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return client;
}

test('JWTs from a JWKS: the SDK works with a valid token, each failure is a 401 that says why, principals are isolated', async () => {
  const { url, port } = await startHttp(state, ['--config', config]);
  const aud = `http://127.0.0.1:${port}/mcp`; // by default the audience is the resource URL

  const meta = await (await fetch(`http://127.0.0.1:${port}/.well-known/oauth-protected-resource`)).json();
  assert.equal(meta.resource, aud);
  assert.deepEqual(meta.authorization_servers, [ISSUER], 'the issuer is named when no authorization_server is set');

  const alice = await sdkClient(url, jwt(claimsFor('alice', aud)));
  const { tools } = await alice.listTools();
  assert.ok(tools.some((t) => t.name === 'run_code'));
  const created = await alice.callTool({ name: 'create_sandbox', arguments: { name: 'mine' } });
  const id = created.structuredContent.sandbox_id;
  const mine = await alice.callTool({ name: 'run_code', arguments: { sandbox_id: id, code: '6*7' } });
  assert.equal(mine.structuredContent.result, '42');

  // Another principal (ES256 this time) sees neither the sandbox nor the session.
  const bob = await sdkClient(url, jwt(claimsFor('bob', [aud, 'https://other.example']), { alg: 'ES256' }));
  const theirs = await bob.callTool({ name: 'run_code', arguments: { sandbox_id: id, code: '6*7' } });
  assert.equal(theirs.isError, true);
  assert.match(theirs.content[0].text, /unknown sandbox_id/);
  const listed = await bob.callTool({ name: 'list_sandboxes', arguments: {} });
  assert.ok(!JSON.stringify(listed.structuredContent).includes(id));
  const bobToken = jwt(claimsFor('bob', aud), { alg: 'ES256' });
  const r404 = await post(url, { jsonrpc: '2.0', id: 9, method: 'ping' }, { Authorization: `Bearer ${bobToken}`, 'Mcp-Session-Id': alice.transport.sessionId, 'MCP-Protocol-Version': '2025-11-25' });
  assert.equal(r404.status, 404);

  // An EdDSA (Ed25519) token works through the SDK too, as its own principal.
  const carol = await sdkClient(url, jwt(claimsFor('carol', aud), { alg: 'EdDSA' }));
  const hers = await carol.callTool({ name: 'run_code', arguments: { code: '6*7' } });
  assert.equal(hers.structuredContent.result, '42');
  const notHers = await carol.callTool({ name: 'run_code', arguments: { sandbox_id: id, code: '1' } });
  assert.equal(notHers.isError, true);

  // The principal is the subject, not the token: a fresh token for alice reaches her sandbox.
  const alice2 = await sdkClient(url, jwt(claimsFor('alice', aud, { jti: 'second' })));
  const again = await alice2.callTool({ name: 'run_code', arguments: { sandbox_id: id, code: '1+1' } });
  assert.equal(again.structuredContent.result, '2');

  // Refusals: 401, error="invalid_token", the reason, the metadata URL, never the token.
  const refused = async (token, reason) => {
    const r = await post(url, INIT, { Authorization: `Bearer ${token}` });
    assert.equal(r.status, 401, reason);
    const h = r.headers.get('www-authenticate');
    assert.equal(h, `Bearer error="invalid_token", error_description="${reason}", resource_metadata="http://127.0.0.1:${port}/.well-known/oauth-protected-resource"`);
    const body = await r.text();
    const payload = token.split('.')[1];
    assert.ok(!body.includes(payload) && !h.includes(payload), 'no part of the token is echoed');
  };
  await refused(jwt(claimsFor('alice', aud, { exp: now() - 3600 })), 'token expired');
  await refused(jwt(claimsFor('alice', 'http://127.0.0.1:1/mcp')), 'wrong audience');
  // A token minted for another server on the same name (127.0.0.1:3000) fails here even when
  // the request claims that Host: the default audience takes this server's own port.
  const foreign = jwt(claimsFor('alice', 'http://127.0.0.1:3000/mcp'));
  const viaHost = await new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path: '/mcp', method: 'POST', headers: {
      Host: '127.0.0.1:3000', Authorization: `Bearer ${foreign}`, 'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res));
    });
    req.on('error', reject);
    req.end(JSON.stringify(INIT));
  });
  assert.equal(viaHost.statusCode, 401);
  assert.match(viaHost.headers['www-authenticate'], /wrong audience/);
  const metaVia = await new Promise((resolve, reject) => {
    httpRequest({ host: '127.0.0.1', port, path: '/.well-known/oauth-protected-resource', headers: { Host: '127.0.0.1:3000' } }, (res) => {
      let b = '';
      res.on('data', (d) => { b += d; });
      res.on('end', () => resolve(JSON.parse(b)));
    }).on('error', reject).end();
  });
  assert.equal(metaVia.resource, aud, 'the metadata names this server\'s port whatever the Host says');
  await refused(jwt(claimsFor('alice', aud, { iss: 'https://evil.example' })), 'wrong issuer');
  await refused(jwt(claimsFor('alice', aud), { key: stranger.privateKey }), 'bad signature');
  await refused(jwt(claimsFor('carol', aud), { alg: 'EdDSA', key: edStranger.privateKey }), 'bad signature');
  await refused(jwt(claimsFor('carol', aud), { alg: 'EdDSA', kid: 'rsa-1' }), 'signature algorithm does not match the key');
  await refused(jwt(claimsFor('alice', aud), { kid: 'rsa-9' }), 'unknown kid');
  const t = jwt(claimsFor('alice', aud)).split('.');
  await refused(`${b64u('{"alg":"none","kid":"rsa-1"}')}.${t[1]}.`, 'signature algorithm not allowed');
  await refused(`${t[0]}.${b64u(JSON.stringify(claimsFor('mallory', aud)))}.${t[2]}`, 'bad signature');

  // No token at all: the challenge carries no error code (RFC 6750 3.1).
  const none = await post(url, INIT);
  assert.equal(none.status, 401);
  assert.match(none.headers.get('www-authenticate'), /^Bearer resource_metadata="/);

  // A valid JWT in the query string is never accepted.
  const valid = jwt(claimsFor('alice', aud));
  for (const q of ['access_token', 'token']) {
    const r = await post(`${url}?${q}=${valid}`, INIT);
    assert.equal(r.status, 400, q);
  }
  assert.equal((await post(url, INIT, { Authorization: `Bearer ${valid}` })).status, 200, 'the same token works in the header');

  await alice.close();
  await alice2.close();
  await bob.close();
  await carol.close();
});

test('JWT validation counts as auth for a non-loopback address; a JWKS that cannot work stops startup', async () => {
  const { log } = await startHttp(state, ['--config', config], '0.0.0.0:0');
  assert.match(log(), /"msg":"http listening".*"auth":"jwt"/);
  await stopHttp();

  const bad = join(dir, 'bad.toml');
  const hmacOnly = join(dir, 'hmac.json');
  writeFileSync(hmacOnly, JSON.stringify({ keys: [{ kty: 'oct', k: b64u('secret'), kid: 'h' }] }));
  writeFileSync(bad, `[http]\njwt_jwks_file = "${hmacOnly}"\njwt_issuer = "${ISSUER}"\n`);
  await assert.rejects(startHttp(state, ['--config', bad]), /no usable signing key/);
  writeFileSync(bad, `[http]\njwt_jwks_file = "${join(dir, 'missing.json')}"\njwt_issuer = "${ISSUER}"\n`);
  await assert.rejects(startHttp(state, ['--config', bad]), /http\.jwt_jwks_file .*missing\.json: No such file/);
  writeFileSync(bad, `[http]\njwt_jwks_file = "${jwksFile}"\n`);
  await assert.rejects(startHttp(state, ['--config', bad]), /http\.jwt_issuer is not/);
  writeFileSync(bad, `[http]\njwt_jwks_file = "${jwksFile}"\njwt_issuer = "${ISSUER}"\njwt_algorithms = ["HS256"]\n`);
  await assert.rejects(startHttp(state, ['--config', bad]), /"HS256" is not accepted/);
});

test('a rewritten JWKS file is picked up without a restart: a new key works, a removed one stops, a broken file changes nothing', async () => {
  const rotating = join(dir, 'rotating.json');
  const rotate = (keys) => { // a new file renamed over the old, as a rotation job should
    writeFileSync(`${rotating}.tmp`, typeof keys === 'string' ? keys : JSON.stringify({ keys }));
    renameSync(`${rotating}.tmp`, rotating);
  };
  const [rsaJwk, ecJwk] = jwks.keys;
  rotate([rsaJwk]);
  const cfg = join(dir, 'rotating.toml');
  writeFileSync(cfg, `[http]\njwt_jwks_file = "${rotating}"\njwt_issuer = "${ISSUER}"\njwt_jwks_reload_s = 1\n`);
  const { url, port, log } = await startHttp(state, ['--config', cfg]);
  const aud = `http://127.0.0.1:${port}/mcp`;
  const status = async (token) => (await post(url, INIT, { Authorization: `Bearer ${token}` })).status;
  const waitFor = async (token, want) => {
    for (let i = 0; i < 50 && (await status(token)) !== want; i++) await new Promise((r) => setTimeout(r, 100));
    return status(token);
  };
  const rs = jwt(claimsFor('alice', aud));
  const es = jwt(claimsFor('bob', aud), { alg: 'ES256' });
  assert.equal(await status(rs), 200);
  assert.equal(await status(es), 401, '(control) the EC key is not in the file yet');

  rotate([rsaJwk, ecJwk]);
  assert.equal(await waitFor(es, 200), 200, 'the added key is accepted within the reload interval');
  assert.match(log(), /"msg":"jwt keys reloaded".*"keys":"2"/);

  rotate('{"keys": [');
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal(await status(es), 200, 'a file that does not load leaves the keys in force');
  assert.equal(await status(rs), 200);
  assert.match(log(), /"msg":"jwt keys not reloaded; the previous keys stay in force"/);

  rotate([ecJwk]);
  assert.equal(await waitFor(rs, 401), 401, 'a key removed from the file stops being accepted');
  assert.equal(await status(es), 200);
  await stopHttp();
});

test('keys from a JWKS URL: fetched at startup, and again when a token names a key id not known yet, or names none and no key verifies it', async () => {
  const [rsaJwk, ecJwk] = jwks.keys;
  let published = { keys: [rsaJwk] };
  let hits = 0;
  const endpoint = createServer((req, res) => {
    hits++;
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(published));
  });
  await new Promise((r) => endpoint.listen(0, '127.0.0.1', r));
  const jwksUrl = `http://127.0.0.1:${endpoint.address().port}/.well-known/jwks.json`;
  try {
    // No periodic fetch here: only a token under an unknown kid makes the server fetch again.
    const cfg = join(dir, 'url.toml');
    writeFileSync(cfg, `[http]\njwt_jwks_url = "${jwksUrl}"\njwt_issuer = "${ISSUER}"\njwt_jwks_url_refresh_s = 0\n`);
    const { url, port, log } = await startHttp(state, ['--config', cfg]);
    assert.match(log(), /"msg":"jwt keys loaded","url":"http:\/\/127\.0\.0\.1:\d+\/\.well-known\/jwks\.json","keys":"1"/);
    assert.equal(hits, 1);
    const aud = `http://127.0.0.1:${port}/mcp`;
    const status = async (token) => (await post(url, INIT, { Authorization: `Bearer ${token}` })).status;
    const rs = jwt(claimsFor('alice', aud));
    const es = jwt(claimsFor('bob', aud), { alg: 'ES256' });
    assert.equal(await status(rs), 200);
    assert.equal(await status(es), 401, '(control) the EC key is not published yet');

    // Published now: the next unknown-kid refusals ask for a fetch, at most one per 30 s since
    // the last, so it comes within about 30 s of startup, however many tokens ask meanwhile.
    published = { keys: [rsaJwk, ecJwk] };
    let st = 401;
    for (let i = 0; i < 45 && st !== 200; i++) {
      st = await status(es);
      if (st !== 200) await new Promise((r) => setTimeout(r, 1000));
    }
    assert.equal(st, 200, 'the newly published key is accepted without a restart');
    assert.equal(hits, 2, 'one early fetch for all the refusals in the gap');
    assert.match(log(), /"msg":"jwt keys reloaded","url":"[^"]+","keys":"2"/);
    assert.equal(await status(rs), 200);

    // The provider rotates to a new RSA key, and its tokens name no kid: refused as no key
    // verifying them, which asks for a fetch as well (it once waited for the refresh interval).
    const rotated = jwt(claimsFor('carol', aud), { kid: null, key: stranger.privateKey });
    assert.equal(await status(rotated), 401, '(control) the new key is not published yet');
    published = { keys: [rsaJwk, ecJwk, { ...stranger.publicKey.export({ format: 'jwk' }), kid: 'rsa-2', alg: 'RS256', use: 'sig' }] };
    st = 401;
    for (let i = 0; i < 45 && st !== 200; i++) {
      st = await status(rotated);
      if (st !== 200) await new Promise((r) => setTimeout(r, 1000));
    }
    assert.equal(st, 200, 'a kid-less token under the newly published key is accepted without a restart');
    assert.equal(hits, 3);
    assert.equal(await status(jwt(claimsFor('carol', aud), { kid: null, key: edStranger.privateKey, alg: 'EdDSA' })), 401, '(control) a key nobody published is still refused');
    await stopHttp();

    // A URL that cannot work stops startup, with the reason.
    const bad = join(dir, 'bad-url.toml');
    writeFileSync(bad, `[http]\njwt_jwks_url = "http://login.example.test/jwks.json"\njwt_issuer = "${ISSUER}"\n`);
    await assert.rejects(startHttp(state, ['--config', bad]), /must be https:\/\//);
    published = { keys: [] };
    writeFileSync(bad, `[http]\njwt_jwks_url = "${jwksUrl}"\njwt_issuer = "${ISSUER}"\n`);
    await assert.rejects(startHttp(state, ['--config', bad]), /no usable signing key|not a JWKS/);
  } finally {
    endpoint.close();
  }
  await assert.rejects(startHttp(state, ['--config', join(dir, 'bad-url.toml')]), /http\.jwt_jwks_url: http:\/\/127\.0\.0\.1:\d+\/\.well-known\/jwks\.json: .*(refused|connect)/i);
});

test('a JWKS URL over TLS must present a certificate the server trusts: the system\'s CAs, or http.jwt_jwks_ca_file', async () => {
  // A self-signed certificate for 127.0.0.1: refused against the system's CAs, accepted once
  // http.jwt_jwks_ca_file names it; the same endpoint over plain http is accepted (control).
  const key = join(dir, 'tls-key.pem');
  const cert = join(dir, 'tls-cert.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
    '-nodes', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-days', '1',
    '-keyout', key, '-out', cert], { stdio: 'ignore' });
  const body = JSON.stringify(jwks);
  const handler = (req, res) => { res.writeHead(200); res.end(body); };
  const tls = createHttpsServer({ key: readFileSync(key), cert: readFileSync(cert) }, handler);
  const plain = createServer(handler);
  await new Promise((r) => tls.listen(0, '127.0.0.1', r));
  await new Promise((r) => plain.listen(0, '127.0.0.1', r));
  const cfg = join(dir, 'tls.toml');
  try {
    writeFileSync(cfg, `[http]\njwt_jwks_url = "http://127.0.0.1:${plain.address().port}/jwks"\njwt_issuer = "${ISSUER}"\n`);
    const { log } = await startHttp(state, ['--config', cfg]);
    assert.match(log(), /"msg":"jwt keys loaded".*"keys":"2"/, '(control) the same keys over plain http to loopback load');
    await stopHttp();
    writeFileSync(cfg, `[http]\njwt_jwks_url = "https://127.0.0.1:${tls.address().port}/jwks"\njwt_issuer = "${ISSUER}"\n`);
    await assert.rejects(startHttp(state, ['--config', cfg]), /http\.jwt_jwks_url: https:\/\/127\.0\.0\.1:\d+\/jwks: .*(certificate|self.signed)/i);
    writeFileSync(cfg, `[http]\njwt_jwks_url = "https://127.0.0.1:${tls.address().port}/jwks"\njwt_jwks_ca_file = "${cert}"\njwt_issuer = "${ISSUER}"\n`);
    const trusted = await startHttp(state, ['--config', cfg]);
    assert.match(trusted.log(), /"msg":"jwt keys loaded","url":"https:\/\/127\.0\.0\.1:\d+\/jwks","keys":"2"/);
    const aud = `http://127.0.0.1:${trusted.port}/mcp`;
    const r = await post(trusted.url, INIT, { Authorization: `Bearer ${jwt(claimsFor('alice', aud))}` });
    assert.equal(r.status, 200, 'a token checked with keys fetched over TLS');
    await stopHttp();
  } finally {
    tls.close();
    plain.close();
  }
});

// Behind a TLS proxy the server cannot see the URL clients use: http.public_url says it, and
// http.jwt_audience the resource tokens are minted for. Everything the server hands out must
// name those, or the SDK refuses the metadata and links point at the listen address.
test('behind a proxy: http.public_url names the resource, the 401\'s metadata URL, download links and the OpenAPI server; http.jwt_audience what tokens must name', async () => {
  const PUBLIC = 'https://sandbox.example.test/sbx';
  const base = `[http]\njwt_jwks_file = "${jwksFile}"\njwt_issuer = "${ISSUER}"\n` +
    `public_url = "${PUBLIC}/"\nallowed_hosts = ["127.0.0.1", "sandbox.example.test"]\n`;
  const proxied = join(dir, 'proxied.toml');
  writeFileSync(proxied, base);
  let { port } = await startHttp(join(dir, 'state-proxied'), ['--config', proxied]);
  const local = `http://127.0.0.1:${port}`;
  // Without jwt_audience, the resource (and so the audience) is the public URL's /mcp.
  for (const path of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
    const meta = await (await fetch(local + path)).json();
    assert.equal(meta.resource, `${PUBLIC}/mcp`, path);
  }
  const refused = await post(`${local}/mcp`, INIT);
  assert.equal(refused.status, 401);
  assert.equal(refused.headers.get('www-authenticate'), `Bearer resource_metadata="${PUBLIC}/.well-known/oauth-protected-resource"`);
  const wrongAud = await post(`${local}/mcp`, INIT, { Authorization: `Bearer ${jwt(claimsFor('alice', `${local}/mcp`))}` });
  assert.equal(wrongAud.status, 401, 'a token for the listen address is not one for the public resource');
  const api = await (await fetch(`${local}/api/v1/openapi.json`)).json();
  assert.deepEqual(api.servers, [{ url: PUBLIC }]);

  const alice = await sdkClient(`${local}/mcp`, jwt(claimsFor('alice', `${PUBLIC}/mcp`)));
  const r = await alice.callTool({ name: 'run_code', arguments: { code: "open('out.txt', 'w').write('proxied')" } });
  const dl = r.content.find((x) => x.type === 'resource_link' && x.name === 'out.txt')._meta['mcp-sandbox/download'];
  assert.match(dl, /^https:\/\/sandbox\.example\.test\/sbx\/files\/sb-[0-9a-f]{12}\/out\.txt\?exp=\d+&sig=[0-9a-f]{64}$/);
  // What the proxy forwards (its prefix taken off) is a working link.
  const res = await fetch(local + dl.slice(PUBLIC.length));
  assert.equal(res.status, 200);
  assert.equal(await res.text(), 'proxied');
  // The legacy transport's endpoint event is absolute: relative, "/messages" would resolve
  // against the client's https://sandbox.example.test/sbx/sse and lose the prefix.
  const token = jwt(claimsFor('alice', `${PUBLIC}/mcp`));
  const ac = new AbortController();
  const sse = await fetch(`${local}/sse`, { headers: { Accept: 'text/event-stream', Authorization: `Bearer ${token}` }, signal: ac.signal });
  assert.equal(sse.status, 200);
  const reader = sse.body.getReader();
  let events = '';
  while (!/\n\n/.test(events)) events += new TextDecoder().decode((await reader.read()).value);
  const endpoint = /^event: endpoint\ndata: (\S+)\n\n/.exec(events)?.[1];
  assert.match(endpoint ?? events, /^https:\/\/sandbox\.example\.test\/sbx\/messages\?sessionId=[0-9a-f]+$/);
  const msg = await post(local + endpoint.slice(PUBLIC.length), { jsonrpc: '2.0', id: 1, method: 'ping' }, { Authorization: `Bearer ${token}` });
  assert.equal(msg.status, 202, 'what the proxy forwards reaches the session');
  ac.abort();
  await alice.close();
  await stopHttp();

  // With jwt_audience (an identifier, as some authorization servers have it), tokens must name
  // it; the metadata still names the URL clients use (RFC 9728 3.3), or the SDK refuses it.
  const AUD = 'api://sandbox-prod';
  writeFileSync(proxied, `${base}jwt_audience = "${AUD}"\n`);
  ({ port } = await startHttp(join(dir, 'state-proxied'), ['--config', proxied]));
  const meta = await (await fetch(`http://127.0.0.1:${port}/.well-known/oauth-protected-resource`)).json();
  assert.equal(meta.resource, `${PUBLIC}/mcp`);
  const ok = await post(`http://127.0.0.1:${port}/mcp`, INIT, { Authorization: `Bearer ${jwt(claimsFor('alice', AUD))}` });
  assert.equal(ok.status, 200);
  await ok.body?.cancel();
  const other = await post(`http://127.0.0.1:${port}/mcp`, INIT, { Authorization: `Bearer ${jwt(claimsFor('alice', `${PUBLIC}/mcp`))}` });
  assert.equal(other.status, 401, 'the audience is jwt_audience, not the resource URL');
  await other.text();
  await stopHttp();

  // A public_url that is no URL stops startup, naming the key.
  writeFileSync(proxied, `${base.replace(`public_url = "${PUBLIC}/"`, 'public_url = "sandbox.example.test"')}`);
  await assert.rejects(startHttp(join(dir, 'state-proxied'), ['--config', proxied]), /http\.public_url must start with http:\/\/ or https:\/\//);
});
