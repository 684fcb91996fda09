// Interop test of corral as an OAuth 2.1 resource server (issue 31), with a
// real authorization server and a real client: oidc-provider (a certified
// OpenID provider) on 127.0.0.1:8933 issues JWT access tokens for corral's
// resource (its resource indicators feature, RFC 8707), and the official
// TypeScript SDK's OAuth client support (ClientCredentialsProvider) finds
// corral's metadata from its 401, gets a token by client credentials, and
// calls a tool. corral runs examples/oauth.json as shipped. Then the
// provider rotates its keys (a new ES256 key first, the old RSA key kept)
// while a client calls in a loop: every call keeps working, and a new
// client's token, signed with the new key, is accepted once corral has
// fetched the new key set.
//
//   cd .ci/oauth && npm ci && CORRAL_BIN=/path/to/corral node --test
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import Provider from 'oidc-provider';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { REPO, listening, spawnCorral, stop } from '../interop/harness.js';

// What examples/oauth.json names.
const ISSUER = 'http://127.0.0.1:8933';
const RESOURCE = 'http://127.0.0.1:8932/mcp';
const SCOPE = 'mcp:tools';
const SECRET = crypto.randomBytes(24).toString('hex');

// signingKey returns a new private JWK for oidc-provider's keystore.
function signingKey(type, kid) {
  const { privateKey } = type === 'rsa'
    ? crypto.generateKeyPairSync('rsa', { modulusLength: 2048 })
    : crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return { ...privateKey.export({ format: 'jwk' }), kid, use: 'sig' };
}

// newProvider returns an oidc-provider that signs access tokens for corral
// with alg, its key set keys (the first key of alg signs).
function newProvider(keys, alg) {
  const provider = new Provider(ISSUER, {
    clients: [{
      client_id: 'agent', client_secret: SECRET,
      grant_types: ['client_credentials'], response_types: [], redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic',
    }],
    jwks: { keys },
    scopes: [SCOPE],
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => RESOURCE,
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, resource) => {
          if (resource !== RESOURCE) throw new Provider.errors.InvalidTarget();
          return { scope: SCOPE, audience: RESOURCE, accessTokenTTL: 300, accessTokenFormat: 'jwt', jwt: { sign: { alg } } };
        },
      },
    },
  });
  provider.proxy = false;
  return provider;
}

// header returns the JOSE header of a JWT.
const header = (jwt) => JSON.parse(Buffer.from(jwt.split('.')[0], 'base64url').toString());

async function connect(t, name) {
  const auth = new ClientCredentialsProvider({ clientId: 'agent', clientSecret: SECRET, scope: SCOPE, expectedIssuer: ISSUER, clientName: name });
  const client = new Client({ name, version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(RESOURCE), { authProvider: auth }));
  t.after(() => client.close().catch(() => {}));
  return { client, auth };
}

const echo = async (client, text) => (await client.callTool({ name: 'echo', arguments: { text } })).content[0].text;

test('oauth: the SDK client finds the issuer from the 401, gets a token from oidc-provider, and calls through key rotation', async (t) => {
  const oldKey = signingKey('rsa', 'rsa-1');
  let provider = newProvider([oldKey], 'RS256');
  const server = http.createServer((req, res) => provider.callback()(req, res));
  await new Promise((resolve, reject) => server.once('error', reject).listen(8933, '127.0.0.1', resolve));
  t.after(() => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }));

  const proc = spawnCorral(path.join(REPO, 'examples', 'oauth.json'));
  t.after(async () => {
    const { code, signal } = await stop(proc.child);
    assert.deepEqual([code, signal], [0, null], `corral's exit\n${proc.log}`);
  });
  await listening(proc);

  // Discovery: the 401 names the metadata, which names the issuer.
  const r = await fetch(RESOURCE, { method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' }, body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' });
  assert.equal(r.status, 401);
  const challenge = r.headers.get('www-authenticate');
  const metaURL = /resource_metadata="([^"]+)"/.exec(challenge)?.[1];
  assert.equal(metaURL, 'http://127.0.0.1:8932/.well-known/oauth-protected-resource/mcp', challenge);
  assert.match(challenge, /scope="mcp:tools"/);
  const meta = await (await fetch(metaURL)).json();
  assert.equal(meta.resource, RESOURCE);
  assert.deepEqual(meta.authorization_servers, [ISSUER]);

  // The SDK's OAuth client does the rest by itself.
  const a = await connect(t, 'corral-oauth-a');
  assert.equal(header(a.auth.tokens().access_token).kid, 'rsa-1');
  assert.deepEqual((await a.client.listTools()).tools.map((x) => x.name), ['echo'], 'client agent sees its profile');
  assert.equal(await echo(a.client, 'hello'), 'hello');

  // Key rotation while a calls: a new ES256 key signs, the old one stays
  // published (so tokens already issued stay valid until they expire).
  let calls = 0, failures = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      try { assert.equal(await echo(a.client, `call ${calls}`), `call ${calls}`); } catch (e) { failures.push(e); }
      calls++;
    }
  })();
  await sleep(300);
  provider = newProvider([signingKey('ec', 'ec-2'), oldKey], 'ES256');
  // corral fetches a key set again on an unknown kid at most once per
  // jwksRefreshInterval (1s in the example), counted from its last fetch.
  await sleep(1100);
  const b = await connect(t, 'corral-oauth-b');
  assert.deepEqual([header(b.auth.tokens().access_token).kid, header(b.auth.tokens().access_token).alg], ['ec-2', 'ES256']);
  assert.equal(await echo(b.client, 'after rotation'), 'after rotation');
  await sleep(300);
  running = false;
  await loop;
  assert.deepEqual(failures, [], `calls failed during rotation\n${proc.log}`);
  assert.ok(calls > 5, `only ${calls} calls during rotation`);

  // A token from elsewhere (signed by a key the issuer never published) is refused.
  const forged = a.auth.tokens().access_token.split('.').slice(0, 2).join('.') + '.' + Buffer.alloc(256).toString('base64url');
  const f = await fetch(RESOURCE, { method: 'POST', headers: { Authorization: `Bearer ${forged}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' }, body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' });
  assert.equal(f.status, 401);
  assert.match(f.headers.get('www-authenticate'), /error="invalid_token"/);
});
