// A real OpenID Connect provider (node oidc-provider) for the catalog's tests and local runs.
//
//   node infra/oidc/provider.mjs [config.json]      (or OIDC_CONFIG=config.json)
//
// The config format is in README.md beside this file. Without a config it serves one demo client
// (demo / demo-secret) and one account (alice) on http://127.0.0.1:9400.
// When it listens it prints `OIDC_READY {"issuer": ...}` on stdout and, if the config names a
// `ready_file`, writes that JSON there (atomically), so a caller may ask for port 0.
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';

// oidc-provider's notices go to stdout: keep stdout for the ready line alone. Two warnings are
// known and expected here (node 20 is older than it asks for; the in-memory store is what a test
// provider wants): leave them out of the log.
console.info = (...args) => console.error(...args);
const EXPECTED_WARNINGS = ['Unsupported runtime', 'in-memory adapter'];
const warn = console.warn.bind(console);
console.warn = (...args) => {
  if (!EXPECTED_WARNINGS.some((w) => String(args[0]).includes(w))) warn(...args);
};
const { default: Provider, errors } = await import('oidc-provider');

const configPath = process.argv[2] || process.env.OIDC_CONFIG;
const config = configPath ? JSON.parse(fs.readFileSync(configPath, 'utf8')) : {};

const DEMO_CLIENT = {
  client_id: 'demo',
  client_secret: 'demo-secret',
  scope: 'openid email profile offline_access catalog PRINCIPAL_ROLE:ALL',
};
const DEMO_ACCOUNT = { sub: 'alice', email: 'alice@example.com', groups: ['analysts'] };

const host = config.host || '127.0.0.1';
const port = config.port ?? (configPath ? 0 : 9400);
const resource = config.resource || 'urn:catalog';
const audience = config.audience || 'catalog';
const clientsIn = config.clients || [DEMO_CLIENT];
const accounts = config.accounts || (config.clients ? [] : [DEMO_ACCOUNT]);
const autoLogin = config.auto_login ?? false;

// Scopes oidc-provider itself knows ("static" scopes): a client's allow-list is enforced for these.
// Every other scope is a resource (catalog) scope: the token carries the requested ones that the
// client's `scope` allows and silently drops the others (so `PRINCIPAL_ROLE:ALL` never fails).
const CLAIM_NAMES = ['sub', 'email', 'email_verified', 'name', 'groups'];
const extraAccountClaims = [...new Set(accounts.flatMap((a) => Object.keys(a.claims || {})))];
const claimsConfig = {
  openid: [...new Set([...CLAIM_NAMES, ...extraAccountClaims])],
  email: ['email', 'email_verified'],
  profile: ['name'],
};
const STATIC_SCOPES = new Set(['openid', 'offline_access', ...Object.keys(claimsConfig)]);

function log(...args) {
  console.error(new Date().toISOString(), ...args);
}

// ---------------------------------------------------------------- keys

function generateKey(kid) {
  const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { ...privateKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' };
}

let keys = config.jwks?.keys ? [...config.jwks.keys] : [generateKey(config.kid || `k-${crypto.randomUUID().slice(0, 8)}`)];
const signingKid = config.signing_kid || keys[0].kid;
if (!keys.some((k) => k.kid === signingKid)) {
  throw new Error(`signing_kid ${signingKid} is not in jwks`);
}
// ID tokens take the first RS256 key of the keystore: put the signing key first.
keys = [...keys.filter((k) => k.kid === signingKid), ...keys.filter((k) => k.kid !== signingKid)];

// ---------------------------------------------------------------- clients and accounts

const extraClientClaims = new Map();
const clientScopes = new Map();
const clients = clientsIn.map((c) => {
  const {
    claims, grant_types: grantTypes = ['client_credentials'], scope = 'openid catalog', ...rest
  } = c;
  extraClientClaims.set(c.client_id, claims || {});
  clientScopes.set(c.client_id, new Set(scope.split(' ').filter(Boolean)));
  const interactive = grantTypes.includes('authorization_code');
  const metadata = {
    token_endpoint_auth_method: 'client_secret_basic',
    grant_types: grantTypes,
    response_types: interactive ? ['code'] : [],
    redirect_uris: [],
    ...rest,
  };
  // oidc-provider accepts only its own (static) scopes in client metadata; the catalog scopes are
  // kept in clientScopes and offered through the resource server (getResourceServerInfo).
  const oidcScopes = scope.split(' ').filter((s) => STATIC_SCOPES.has(s));
  if (oidcScopes.length) metadata.scope = oidcScopes.join(' ');
  if (metadata.token_endpoint_auth_method === 'none') delete metadata.client_secret;
  return metadata;
});

function findAccountRecord(id) {
  if (!id) return undefined;
  return accounts.find((a) => a.sub === id || a.email === id);
}

function accountClaims(account) {
  const out = { sub: account.sub };
  if (account.email !== undefined) {
    out.email = account.email;
    out.email_verified = account.email_verified ?? true;
  }
  if (account.name !== undefined) out.name = account.name;
  if (account.groups !== undefined) out.groups = account.groups;
  return { ...out, ...(account.claims || {}) };
}

// Resource scopes this client may receive for the catalog resource.
function resourceScopeFor(client) {
  const allowed = clientScopes.get(client.clientId) || new Set();
  return [...allowed].filter((s) => !STATIC_SCOPES.has(s)).join(' ');
}

// ---------------------------------------------------------------- pages

const esc = (s) => String(s).replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);

function page(title, body) {
  return `<!DOCTYPE html><html><head><meta charset="utf-8"><title>${esc(title)}</title></head>`
    + `<body><h1>${esc(title)}</h1>${body}</body></html>`;
}

function loginForm(uid, details, error) {
  const hint = details.params.login_hint || '';
  return page('Sign in', `${error ? `<p id="error">${esc(error)}</p>` : ''}
<form id="login-form" method="post" action="/interaction/${esc(uid)}/login" autocomplete="off">
  <label>Login <input id="login" name="login" value="${esc(hint)}" autofocus></label>
  <label>Password <input id="password" name="password" type="password"></label>
  <button id="submit" type="submit">Sign in</button>
</form>
<p>client: <span id="client">${esc(details.params.client_id)}</span>; any password works unless the account sets one.</p>`);
}

async function readForm(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

// ---------------------------------------------------------------- provider

const ttl = {
  AccessToken: 3600,
  AuthorizationCode: 60,
  ClientCredentials: 3600,
  IdToken: 3600,
  RefreshToken: 86400,
  Interaction: 3600,
  Session: 86400,
  Grant: 86400,
  ...(config.ttl || {}),
};

function configuration() {
  return {
    clients,
    jwks: { keys },
    claims: claimsConfig,
    scopes: ['openid', 'offline_access'],
    ttl,
    conformIdTokenClaims: false,
    cookies: { keys: [crypto.randomBytes(32).toString('base64url')] },
    pkce: { required: (ctx, client) => client.clientAuthMethod === 'none' || !!config.pkce_required },
    clientBasedCORS: () => true,
    issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
    async findAccount(ctx, sub) {
      const account = findAccountRecord(sub);
      if (!account) return undefined;
      return { accountId: account.sub, claims: async () => accountClaims(account) };
    },
    // No consent screen: every requested scope the client is allowed is granted.
    async loadExistingGrant(ctx) {
      const { client, session } = ctx.oidc;
      const grantId = ctx.oidc.result?.consent?.grantId || session.grantIdFor(client.clientId);
      const grant = grantId
        ? await ctx.oidc.provider.Grant.find(grantId)
        : new ctx.oidc.provider.Grant({ clientId: client.clientId, accountId: session.accountId });
      const allowed = clientScopes.get(client.clientId) || new Set();
      const requested = [...ctx.oidc.requestParamScopes].filter((s) => allowed.has(s));
      grant.addOIDCScope(requested.filter((s) => STATIC_SCOPES.has(s)).join(' '));
      if (ctx.oidc.claims) grant.addOIDCClaims(Object.keys(ctx.oidc.claims.id_token || {}));
      for (const indicator of Object.keys(ctx.oidc.resourceServers || {})) {
        grant.addResourceScope(indicator, requested.filter((s) => !STATIC_SCOPES.has(s)).join(' '));
      }
      await grant.save();
      return grant;
    },
    interactions: { url: async (ctx, interaction) => `/interaction/${interaction.uid}` },
    async renderError(ctx, out) {
      ctx.type = 'html';
      ctx.body = page('Error', Object.entries(out)
        .map(([k, v]) => `<pre><strong>${esc(k)}</strong>: <span class="${esc(k)}">${esc(v)}</span></pre>`).join(''));
    },
    extraTokenClaims: async (ctx, token) => {
      if (token.accountId) {
        const account = findAccountRecord(token.accountId);
        if (!account) return undefined;
        const { sub, email_verified: _ev, ...rest } = accountClaims(account);
        return rest;
      }
      return extraClientClaims.get(token.clientId) || undefined;
    },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      introspection: { enabled: false },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: async () => resource,
        useGrantedResource: async () => true,
        async getResourceServerInfo(ctx, indicator, client) {
          if (indicator !== resource) {
            throw new errors.InvalidTarget(`unknown resource indicator (this provider serves ${resource})`);
          }
          const info = {
            audience,
            scope: resourceScopeFor(client),
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: 'RS256', kid: signingKid } },
          };
          if (!info.scope) delete info.scope;
          return info;
        },
      },
    },
  };
}

const server = http.createServer();
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(port, host, resolve);
});
const boundPort = server.address().port;
const issuer = config.issuer || `http://${host}:${boundPort}`;
const provider = new Provider(issuer, configuration());

for (const event of ['server_error', 'grant.error', 'authorization.error', 'end_session.error', 'backchannel.error']) {
  provider.on(event, (ctx, err) => log(event, err?.name, err?.message, err?.error_description || '', err?.stack && event === 'server_error' ? err.stack : ''));
}
provider.use(async (ctx, next) => {
  await next();
  log(ctx.method, ctx.path, ctx.status);
});

const callback = provider.callback();

async function interaction(req, res, url) {
  const match = /^\/interaction\/([^/]+)(\/login)?$/.exec(url.pathname);
  if (!match) return false;
  const [, uid, login] = match;
  const send = (status, html) => {
    res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
    res.end(html);
  };
  let details;
  try {
    details = await provider.interactionDetails(req, res);
  } catch (err) {
    send(400, page('Error', `<p id="error">${esc(err.message)}</p>`));
    return true;
  }
  if (details.uid !== uid) {
    send(400, page('Error', '<p id="error">interaction mismatch</p>'));
    return true;
  }
  const finishLogin = async (account) => {
    await provider.interactionFinished(req, res, { login: { accountId: account.sub } }, { mergeWithLastSubmission: false });
  };
  if (details.prompt.name !== 'login') {
    // Consent is granted by loadExistingGrant; any other prompt just continues.
    await provider.interactionFinished(req, res, {}, { mergeWithLastSubmission: true });
    return true;
  }
  if (req.method === 'POST' && login) {
    const form = await readForm(req);
    const account = findAccountRecord(form.get('login'));
    if (!account || (account.password !== undefined && account.password !== form.get('password'))) {
      send(200, loginForm(uid, details, 'unknown login or wrong password'));
      return true;
    }
    await finishLogin(account);
    return true;
  }
  let auto;
  if (autoLogin === true) auto = findAccountRecord(details.params.login_hint) || accounts[0];
  else if (autoLogin) auto = findAccountRecord(autoLogin);
  if (auto) {
    await finishLogin(auto);
    return true;
  }
  send(200, loginForm(uid, details));
  return true;
}

server.on('request', (req, res) => {
  const url = new URL(req.url, issuer);
  if (url.pathname.startsWith('/interaction/')) {
    res.on('finish', () => log(req.method, url.pathname, res.statusCode));
    interaction(req, res, url).catch((err) => {
      log('interaction error', err.stack);
      if (!res.headersSent) {
        res.writeHead(500, { 'content-type': 'text/plain' });
      }
      res.end(String(err.message));
    });
    return;
  }
  callback(req, res);
});

const ready = JSON.stringify({ issuer, port: boundPort, pid: process.pid, audience, resource, signing_kid: signingKid });
if (config.ready_file) {
  const tmp = `${config.ready_file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, ready);
  fs.renameSync(tmp, path.resolve(config.ready_file));
}
process.stdout.write(`OIDC_READY ${ready}\n`);
log(`oidc provider ready at ${issuer} (audience ${audience}, resource ${resource}, kid ${signingKid})`);

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    server.close();
    server.closeAllConnections?.();
    process.exit(0);
  });
}
