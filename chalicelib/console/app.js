// The catalog browser: a client of the catalog's own HTTP API, under the caller's own policies.
// Everything is rendered with textContent (never innerHTML), so names and properties are inert.
"use strict";

const BASE = location.pathname.replace(/\/ui\/?$/, "");
const S3TABLES = BASE.replace(/\/_iceberg$/, "") + "/_s3tables"; // the S3 Tables face, beside the REST one
const US = "\u001f"; // namespace levels in a path segment (Iceberg REST)
const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "onclick") node.addEventListener("click", v);
    else if (v !== undefined && v !== null) node.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

function token() {
  return sessionStorage.getItem("catalog-token");
}

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.style.display = message ? "block" : "none";
}

function notice(message) {
  const box = $("notice");
  box.textContent = message;
  box.style.display = message ? "block" : "none";
}

// Iceberg ids (snapshot ids) are 64-bit: past 2^53 a JS number rounds them, and links and undo built
// from a rounded id name a snapshot that does not exist. Such integers keep their exact digits.
function parseJSON(text) {
  return JSON.parse(text, (key, value, context) =>
    typeof value === "number" && !Number.isSafeInteger(value) && context && /^-?\d+$/.test(context.source)
      ? context.source
      : value
  );
}

// A call to the Iceberg REST face, or (given its base path) to another face of the same catalog: the
// bearer token authenticates on every face. A refusal throws an Error carrying the HTTP status.
async function api(method, path, body, face) {
  const headers = { Authorization: "Bearer " + token() };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const url = (face === undefined ? BASE : face) + path;
  const resp = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (resp.status === 401) {
    signOut("Your session ended; sign in again.");
    throw new Error("Not signed in");
  }
  const text = await resp.text();
  const data = text ? parseJSON(text) : null;
  if (!resp.ok) {
    // Iceberg REST answers {error: {type, message}}; S3 Tables {message} and x-amzn-ErrorType.
    const err = (data && data.error) || { type: resp.headers.get("x-amzn-ErrorType"), message: data && data.message };
    const failure = new Error(`${resp.status} ${err.type || ""}: ${err.message || text}`.trim());
    failure.status = resp.status;
    throw failure;
  }
  return data;
}

// Every page of a paged list (warehouses, the trash): a catalog with more than a page of them shows
// them all, not only those whose names sort first.
async function apiAll(path, key) {
  const items = [];
  let next = "";
  for (;;) {
    const sep = path.includes("?") ? "&" : "?";
    const data = await api("GET", `${path}${sep}pageToken=${encodeURIComponent(next)}`);
    items.push(...data[key]);
    next = data["next-page-token"];
    if (!next) return items;
  }
}

const nsPath = (levels) => encodeURIComponent(levels.join(US));
const fmtTime = (ms) => (ms ? new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z") : "");
const link = (href, text, attrs) => el("a", { href, ...(attrs || {}) }, text);

function table(headers, rows, attrs) {
  return el(
    "table",
    attrs || {},
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((r) => el("tr", {}, r.map((c) => el("td", {}, c)))))
  );
}

function section(title, ...children) {
  return el("section", {}, el("h2", {}, title), ...children);
}

function crumbs(parts) {
  const out = el("div", { class: "crumbs" });
  parts.forEach(([href, text], i) => {
    if (i) out.append(" / ");
    out.append(href ? link(href, text) : text);
  });
  return out;
}

// ---- sign in -----------------------------------------------------------------------------------

function renderLogin(message) {
  $("nav").hidden = true;
  $("sign-out").hidden = true;
  $("who").textContent = "";
  const key = el("input", { id: "login-key", autocomplete: "username" });
  const secret = el("input", { id: "login-secret", type: "password", autocomplete: "current-password" });
  const pasted = el("input", { id: "login-token", type: "password" });
  const form = el(
    "form",
    { class: "login" },
    section(
      "Sign in",
      el("label", { for: "login-key" }, "Access key id"),
      key,
      el("label", { for: "login-secret" }, "Secret access key"),
      secret,
      el("label", { for: "login-token" }, "or a bearer token"),
      pasted,
      el("p", {}, el("button", { id: "login-submit", type: "submit" }, "Sign in"))
    )
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    showError("");
    try {
      let t = pasted.value.trim();
      let who = "token";
      if (!t) {
        const form = new URLSearchParams({
          grant_type: "client_credentials",
          client_id: key.value.trim(),
          client_secret: secret.value,
          scope: "catalog",
        });
        const resp = await fetch(BASE + "/v1/oauth/tokens", { method: "POST", body: form });
        const data = await resp.json();
        if (!resp.ok) throw new Error(data.error_description || data.error || "sign-in refused");
        t = data.access_token;
        who = key.value.trim();
      }
      for (const k of SESSION_KEYS) sessionStorage.removeItem(k);
      sessionStorage.setItem("catalog-token", t); // the secret itself is never kept
      sessionStorage.setItem("catalog-who", who);
      route();
    } catch (e) {
      showError("Sign-in failed: " + e.message);
    }
  });
  const oidc = CONFIG.oidc;
  if (oidc) {
    const button = el("button", { id: "login-oidc", type: "button" }, "Sign in with " + oidc.issuer);
    button.addEventListener("click", async () => {
      showError("");
      button.disabled = true;
      try {
        await beginProviderSignIn(oidc);
      } catch (e) {
        button.disabled = false;
        showError(`Sign-in with ${oidc.issuer} failed: ${e.message}`);
      }
    });
    const withProvider = section("Sign in through your identity provider", el("p", {}, button));
    withProvider.id = "login-provider";
    form.prepend(withProvider);
  }
  $("view").replaceChildren(form);
  if (message) showError(message);
}

function signOut(message) {
  for (const k of SESSION_KEYS) sessionStorage.removeItem(k);
  location.hash = "#/";
  renderLogin(message);
}

// ---- sign in through an identity provider (OpenID Connect: authorization code with PKCE) -------------
// The catalog names the provider (GET ui/config: issuer, public client id, scope). The page is a public
// client: no secret, a PKCE S256 verifier kept in this tab's sessionStorage until the provider sends the
// browser back with a code, which is exchanged at the token endpoint. The provider's access token is then
// the bearer token on every call: the catalog verifies it and acts as the role it maps to.

const STS = BASE.replace(/\/_iceberg$/, "") + "/_sts";
const PENDING = "catalog-oidc-pending";
const SESSION_KEYS = [
  "catalog-token",
  "catalog-who",
  "catalog-arn-base",
  "catalog-via",
  "catalog-role",
  "catalog-issuer",
  PENDING,
];
let CONFIG = { oidc: null };

async function loadConfig() {
  try {
    const resp = await fetch(BASE + "/ui/config", { cache: "no-store" });
    if (resp.ok) CONFIG = { oidc: ((await resp.json()) || {}).oidc || null };
  } catch (e) {
    CONFIG = { oidc: null }; // no provider sign-in: the key sign-in works as before
  }
}

function b64url(bytes) {
  let bin = "";
  for (const b of new Uint8Array(bytes)) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

const randomString = (n) => b64url(crypto.getRandomValues(new Uint8Array(n)));

// A token's claims, read (not verified: the catalog verifies the token on every call) to say who signed in.
function claimsOf(jwt) {
  try {
    const part = jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    const bin = atob(part + "=".repeat((4 - (part.length % 4)) % 4));
    return JSON.parse(new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0))));
  } catch (e) {
    return {};
  }
}

const httpUrl = (u) => /^https?:\/\//i.test(String(u || ""));

async function discover(issuer) {
  const where = issuer + "/.well-known/openid-configuration";
  let resp;
  try {
    resp = await fetch(where, { headers: { Accept: "application/json" } });
  } catch (e) {
    throw new Error(`its discovery document (${where}) could not be fetched: ${e.message}`);
  }
  if (!resp.ok) throw new Error(`its discovery document (${where}) answered ${resp.status}`);
  const meta = await resp.json();
  if (String(meta.issuer || "").replace(/\/$/, "") !== issuer) {
    throw new Error(`its discovery document names another issuer (${meta.issuer})`);
  }
  if (!httpUrl(meta.authorization_endpoint) || !httpUrl(meta.token_endpoint)) {
    throw new Error("its discovery document names no authorization or token endpoint");
  }
  const methods = meta.code_challenge_methods_supported;
  if (Array.isArray(methods) && !methods.includes("S256")) throw new Error("it does not support PKCE with S256");
  return meta;
}

const redirectUri = () => location.origin + location.pathname;

async function beginProviderSignIn(oidc) {
  if (!window.crypto || !crypto.subtle) throw new Error("PKCE needs a secure context (https or localhost)");
  const meta = await discover(oidc.issuer);
  const verifier = randomString(48); // 64 characters of [A-Za-z0-9-_] (RFC 7636: 43 to 128)
  const challenge = b64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
  const pending = {
    state: randomString(24),
    verifier,
    issuer: oidc.issuer,
    client_id: oidc.client_id,
    token_endpoint: meta.token_endpoint,
    redirect_uri: redirectUri(),
    hash: location.hash || "#/",
  };
  sessionStorage.setItem(PENDING, JSON.stringify(pending));
  const params = new URLSearchParams({
    response_type: "code",
    client_id: oidc.client_id,
    redirect_uri: pending.redirect_uri,
    scope: oidc.scope,
    state: pending.state,
    code_challenge: challenge,
    code_challenge_method: "S256",
  });
  const at = meta.authorization_endpoint;
  location.assign(at + (at.includes("?") ? "&" : "?") + params);
}

// Back from the provider with ?code=&state= (or ?error=): check the state, trade the code for tokens.
async function finishProviderSignIn(params) {
  const raw = sessionStorage.getItem(PENDING);
  sessionStorage.removeItem(PENDING); // a code and its verifier are used once
  let pending = null;
  try {
    pending = raw ? JSON.parse(raw) : null;
  } catch (e) {
    pending = null;
  }
  // The code leaves the address bar and the history at once.
  history.replaceState(null, "", location.pathname + ((pending && pending.hash) || "#/"));
  const fail = (why) => signOut(`Sign-in with ${(pending && pending.issuer) || "the identity provider"} failed: ${why}`);
  if (params.has("error")) {
    const described = params.get("error_description");
    return fail(`the provider answered ${params.get("error")}${described ? ": " + described : ""}`);
  }
  if (!pending) return fail("this tab did not start a sign-in, or it was already completed; sign in again");
  if (params.get("state") !== pending.state) {
    return fail("the answer's state does not match the one this tab sent (state mismatch); sign in again");
  }
  if (params.has("iss") && params.get("iss").replace(/\/$/, "") !== pending.issuer) {
    return fail(`the answer comes from another issuer (${params.get("iss")})`);
  }
  if (!params.get("code")) return fail("the answer carries no authorization code");
  let resp, body;
  try {
    resp = await fetch(pending.token_endpoint, {
      method: "POST",
      headers: { Accept: "application/json" },
      body: new URLSearchParams({
        grant_type: "authorization_code",
        code: params.get("code"),
        redirect_uri: pending.redirect_uri,
        code_verifier: pending.verifier,
        client_id: pending.client_id,
      }),
    });
    body = await resp.json().catch(() => ({}));
  } catch (e) {
    return fail(`its token endpoint (${pending.token_endpoint}) could not be reached: ${e.message}`);
  }
  if (!resp.ok || !body.access_token) {
    const why = `${body.error || "no access token"}${body.error_description ? ": " + body.error_description : ""}`;
    return fail(`its token endpoint answered ${resp.status}: ${why}`);
  }
  const claims = claimsOf(body.access_token);
  sessionStorage.setItem("catalog-token", body.access_token); // sessionStorage: this tab only, gone when closed
  sessionStorage.setItem("catalog-via", "oidc");
  sessionStorage.setItem("catalog-who", String(claims.sub || "(no subject)"));
  sessionStorage.setItem("catalog-issuer", pending.issuer);
  sessionStorage.removeItem("catalog-role");
  sessionStorage.removeItem("catalog-arn-base");
  return route();
}

function showProviderWho(role) {
  const sub = sessionStorage.getItem("catalog-who") || "";
  const issuer = sessionStorage.getItem("catalog-issuer") || "";
  $("who").replaceChildren(
    "signed in as ",
    el("span", { id: "who-sub" }, sub),
    role ? " (role " : "",
    role ? el("span", { id: "who-role" }, role) : "",
    role ? ")" : "",
    " through " + issuer
  );
}

// The role the provider's token acts as, as the catalog's STS face says (GetCallerIdentity), shown beside
// the subject. A token no role admits is refused (403) with the catalog's reason: shown, not hidden.
async function providerRole() {
  const claims = claimsOf(token());
  if (claims.exp && claims.exp * 1000 <= Date.now()) {
    signOut(`Your sign-in through ${sessionStorage.getItem("catalog-issuer") || "the provider"} expired; sign in again.`);
    return false;
  }
  const known = sessionStorage.getItem("catalog-role");
  if (known) {
    showProviderWho(known);
    return true;
  }
  showProviderWho("");
  let resp, doc;
  try {
    resp = await fetch(STS, {
      method: "POST",
      headers: { Authorization: "Bearer " + token(), "Content-Type": "application/x-www-form-urlencoded" },
      body: "Action=GetCallerIdentity&Version=2011-06-15",
    });
    doc = new DOMParser().parseFromString(await resp.text(), "application/xml");
  } catch (e) {
    showError("The catalog could not say which role you act as: " + e.message);
    return true; // the pages themselves will say what they can
  }
  const pick = (tag) => ((doc.getElementsByTagName(tag)[0] || {}).textContent || "").trim();
  if (resp.ok) {
    const arn = pick("Arn");
    const role = /:assumed-role\/([^/]+)\//.exec(arn);
    sessionStorage.setItem("catalog-role", role ? role[1] : arn);
    showProviderWho(role ? role[1] : arn);
    return true;
  }
  const code = pick("Code");
  const why = pick("Message") || `${resp.status} ${code}`;
  if (resp.status === 401 || /^(InvalidClientTokenId|ExpiredToken|ExpiredTokenException|InvalidIdentityToken)$/.test(code)) {
    signOut("Your session ended; sign in again. (" + why + ")");
    return false;
  }
  if (resp.status !== 403) {
    showError(`The catalog could not say which role you act as: ${resp.status} ${code}: ${why}`);
    return true;
  }
  const sub = sessionStorage.getItem("catalog-who") || "";
  const message = `Signed in as ${sub}, but the catalog refuses this identity: ${why}`;
  $("view").replaceChildren(
    section(
      "No role admits you",
      el("p", { id: "refused", class: "refused" }, message),
      el("p", {}, "Ask the catalog's operator for a role whose trust policy admits this subject, then sign in again.")
    ),
    el("span", { id: "ready", hidden: "" })
  );
  return false;
}

async function start() {
  await loadConfig();
  const params = new URLSearchParams(location.search);
  if (params.has("code") || params.has("error")) return finishProviderSignIn(params);
  return route();
}

// ---- pages ---------------------------------------------------------------------------------------

async function pageWarehouses() {
  const names = await apiAll("/v1/warehouses", "warehouses");
  return [
    section(
      "Warehouses",
      table(
        ["Warehouse"],
        names.map((w) => [link(`#/w/${encodeURIComponent(w)}`, w, { "data-warehouse": w })]),
        { id: "warehouses" }
      )
    ),
  ];
}

async function pageNamespace(wh, levels) {
  const q = levels.length ? `?parent=${nsPath(levels)}` : "";
  const children = await api("GET", `/v1/${encodeURIComponent(wh)}/namespaces${q}`);
  const out = [
    crumbs([["#/", "warehouses"], [`#/w/${encodeURIComponent(wh)}`, wh], ...levels.map((l, i) => [nsHref(wh, levels.slice(0, i + 1)), l])]),
  ];
  if (!levels.length) {
    out.push(
      el(
        "p",
        {},
        link(`#/w/${encodeURIComponent(wh)}/trash`, "Dropped tables (trash)", { id: "trash-link" }),
        "  ·  ",
        link(`#/w/${encodeURIComponent(wh)}/audit`, "Audit trail", { id: "audit-link" })
      )
    );
  }
  out.push(
    section(
      "Namespaces",
      table(
        ["Namespace"],
        children.namespaces.map((ns) => [link(nsHref(wh, ns), ns.join("."), { "data-namespace": ns.join(".") })])
      )
    )
  );
  if (levels.length) {
    const base = `/v1/${encodeURIComponent(wh)}/namespaces/${nsPath(levels)}`;
    const [tables, views] = await Promise.all([api("GET", base + "/tables"), api("GET", base + "/views")]);
    out.push(
      section(
        "Tables",
        table(
          ["Table"],
          tables.identifiers.map((t) => [link(`${nsHref(wh, levels)}/t/${encodeURIComponent(t.name)}`, t.name, { "data-table": t.name })]),
          { id: "tables" }
        )
      ),
      section(
        "Views",
        table(["View"], views.identifiers.map((v) => [link(`${nsHref(wh, levels)}/v/${encodeURIComponent(v.name)}`, v.name, { "data-view": v.name })]))
      )
    );
  }
  return out;
}

function nsHref(wh, levels) {
  return `#/w/${encodeURIComponent(wh)}/ns/${levels.map(encodeURIComponent).join(".")}`;
}

function typeName(t) {
  if (typeof t === "string") return t;
  if (t.type === "list") return `list<${typeName(t.element)}>`;
  if (t.type === "map") return `map<${typeName(t.key)}, ${typeName(t.value)}>`;
  if (t.type === "struct") return "struct";
  return JSON.stringify(t);
}

function flatFields(fields, prefix) {
  const out = [];
  for (const f of fields || []) {
    out.push({ ...f, path: prefix + f.name });
    if (f.type && f.type.type === "struct") out.push(...flatFields(f.type.fields, prefix + f.name + "."));
  }
  return out;
}

function schemaHistory(schemas) {
  const rows = [];
  let previous = new Map();
  for (const s of schemas) {
    const now = new Map(flatFields(s.fields, "").map((f) => [f["id"], f.path]));
    const added = [...now].filter(([id]) => !previous.has(id)).map(([id, p]) => `${p} (${id})`);
    const dropped = [...previous].filter(([id]) => !now.has(id)).map(([id, p]) => `${p} (${id})`);
    rows.push([String(s["schema-id"]), String(now.size), added.join(", "), dropped.join(", ")]);
    previous = now;
  }
  return rows.reverse();
}

function snapshotChart(snapshots) {
  // Records and data files added per snapshot, in commit order: bars (records) and dots (files).
  const W = 960, H = 220, pad = 40;
  const points = snapshots.map((s) => ({
    id: s["snapshot-id"],
    at: s["timestamp-ms"],
    op: (s.summary || {}).operation || "",
    records: Number((s.summary || {})["added-records"] || 0),
    files: Number((s.summary || {})["added-data-files"] || 0),
  }));
  const maxR = Math.max(1, ...points.map((p) => p.records));
  const maxF = Math.max(1, ...points.map((p) => p.files));
  const step = (W - 2 * pad) / Math.max(1, points.length);
  const chart = svg("svg", { id: "snapshot-chart", width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img" });
  chart.append(svg("title", {}, `${points.length} snapshots: records and data files added per snapshot`));
  chart.append(svg("line", { x1: pad, y1: H - pad, x2: W - pad, y2: H - pad, stroke: "#98a2b3" }));
  chart.append(svg("text", { x: 4, y: 14 }, `${maxR} records`));
  chart.append(svg("text", { x: W - pad - 60, y: 14 }, `${maxF} files`));
  points.forEach((p, i) => {
    const h = ((H - 2 * pad) * p.records) / maxR;
    const x = pad + i * step;
    const bar = svg("rect", { class: "bar", x: x, y: H - pad - h, width: Math.max(1, step * 0.8), height: h, fill: "#93c5fd" });
    bar.append(svg("title", {}, `${p.id} ${p.op} ${fmtTime(p.at)}: +${p.records} records, +${p.files} files`));
    chart.append(bar);
    const y = H - pad - ((H - 2 * pad) * p.files) / maxF;
    chart.append(svg("circle", { class: "files", cx: x + step * 0.4, cy: y, r: Math.min(3, Math.max(1, step / 3)), fill: "#c2410c" }));
  });
  if (points.length) {
    chart.append(svg("text", { x: pad, y: H - pad + 16 }, fmtTime(points[0].at)));
    chart.append(svg("text", { x: W - pad - 150, y: H - pad + 16 }, fmtTime(points[points.length - 1].at)));
  }
  const legend = el(
    "div",
    { class: "legend" },
    el("span", {}, el("i", { class: "swatch", style: "background:#93c5fd" }), "records added"),
    el("span", {}, el("i", { class: "swatch", style: "background:#c2410c" }), "data files added")
  );
  return [legend, chart];
}

function auditRows(entries) {
  return entries.map((e) => [
    fmtTime(e.at),
    e.principal,
    e.op,
    e.face,
    summaryOf(e),
  ]);
}

function summaryOf(e) {
  const d = e.detail || {};
  if (d.snapshots) return d.snapshots.map((s) => `${s.operation} +${s["added-records"]} records`).join("; ");
  if (d["set-properties"]) return "set " + d["set-properties"].join(", ");
  if (d["renamed-from"]) return "from " + d["renamed-from"].namespace.join(".") + "." + d["renamed-from"].name;
  if (d.updates) return d.updates.join(", ");
  const t = e.target || {};
  return [t.namespace ? t.namespace.join(".") : "", t.name || t.user || t.warehouse || ""].filter(Boolean).join(".");
}

// ---- replication (S3 Tables' GetTableReplicationStatus, docs/s3tables.md "Replication") ------------

// A table bucket's ARN holds the deployment's region and account, which only the S3 Tables face says:
// its ListTableBuckets, by the warehouse's name as prefix, once a session (every bucket's ARN starts
// alike: `arn:aws:s3tables:<region>:<account>:`).
async function bucketArn(wh) {
  const known = sessionStorage.getItem("catalog-arn-base");
  if (known) return `${known}bucket/${wh}`;
  let next = "";
  for (;;) {
    const page = `/buckets?prefix=${encodeURIComponent(wh)}&maxBuckets=1` + (next ? `&continuationToken=${encodeURIComponent(next)}` : "");
    const data = await api("GET", page, undefined, S3TABLES);
    const found = data.tableBuckets.find((b) => b.name === wh);
    if (found) {
      sessionStorage.setItem("catalog-arn-base", found.arn.slice(0, found.arn.length - `bucket/${wh}`.length));
      return found.arn;
    }
    next = data.continuationToken;
    if (!next) throw new Error(`table bucket ${wh} is not among those you may list (s3tables:ListTableBuckets)`);
  }
}

// The table's destinations, [] when neither it nor its bucket has a replication rule. Its ARN names
// the uuid that owns its location, as S3 Tables' GetTable answers it; a table of a nested namespace
// (no S3 Tables name) was made by the REST or Glue face, whose tables own theirs by their table uuid.
async function replicationOf(wh, levels, name, loading) {
  const bucket = await bucketArn(wh);
  let arn;
  let source = null; // a replica's source table (GetTable's managedTableInformation, as AWS answers it)
  if (levels.length === 1) {
    const q = `tableBucketARN=${encodeURIComponent(bucket)}&namespace=${encodeURIComponent(levels[0])}&name=${encodeURIComponent(name)}`;
    const found = await api("GET", `/get-table?${q}`, undefined, S3TABLES);
    arn = found.tableARN;
    source = ((found.managedTableInformation || {}).replicationInformation || {}).sourceTableARN || null;
  } else {
    arn = `${bucket}/table/${(await loading).metadata["table-uuid"]}`;
  }
  let destinations;
  try {
    destinations = (await api("GET", `/replication-status?tableArn=${encodeURIComponent(arn)}`, undefined, S3TABLES)).destinations;
  } catch (e) {
    if (!(e.status === 404 && /replication configuration/.test(e.message))) throw e;
    destinations = [];
  }
  destinations.source = source;
  return destinations;
}

function replicationBody(levels, name, replication) {
  if (replication.error) {
    const what = replication.status === 403 ? "Replication status refused: " : "Replication status unavailable: ";
    return el("p", { class: "refused" }, what + replication.error);
  }
  const replicaOf = replication.source
    ? el("p", { id: "replica-of" }, "Read-only replica of ", el("code", {}, replication.source))
    : null;
  if (!replication.length) {
    const none = el("p", {}, "not replicated");
    return replicaOf ? el("div", {}, replicaOf, none) : none;
  }
  const rows = replication.map((d) => {
    const dst = d.destinationTableBucketArn.replace(/^.*:bucket\//, "");
    const last = d.lastSuccessfulReplicatedUpdate || {};
    const replica = d.destinationTableArn
      ? link(`${nsHref(dst, levels)}/t/${encodeURIComponent(name)}`, dst, { "data-replica": dst })
      : dst;
    return [
      el("span", { class: "status-" + d.replicationStatus }, d.replicationStatus),
      el("span", { title: d.destinationTableBucketArn }, replica),
      last.metadataLocation ? el("code", {}, last.metadataLocation) : "",
      last.timestamp ? fmtTime(Date.parse(last.timestamp)) || last.timestamp : "",
      d.failureMessage || "",
    ];
  });
  const rowsTable = table(["status", "destination table bucket", "last replicated metadata", "replicated at", "failure"], rows);
  return replicaOf ? el("div", {}, replicaOf, rowsTable) : rowsTable;
}

// Filled in when its calls answer (another face: when deployed, another function that may be starting),
// so the rest of the page does not wait for it; `data-loaded` marks it done.
function replicationSection(levels, name, pending) {
  const box = el("div", { id: "replication" }, "Loading…");
  pending.then((replication) => {
    box.replaceChildren(replicationBody(levels, name, replication));
    box.setAttribute("data-loaded", "");
  });
  return section("Replication", box);
}

async function pageTable(wh, levels, name) {
  const path = `/v1/${encodeURIComponent(wh)}/namespaces/${nsPath(levels)}/tables/${encodeURIComponent(name)}`;
  const loading = api("GET", path);
  const replication = replicationOf(wh, levels, name, loading).catch((e) => ({ error: e.message, status: e.status }));
  const [loaded, audit] = await Promise.all([
    loading,
    api("GET", `/v1/${encodeURIComponent(wh)}/audit?namespace=${nsPath(levels)}&table=${encodeURIComponent(name)}&pageSize=20`).catch(
      (e) => ({ error: e.message })
    ),
  ]);
  const m = loaded.metadata;
  const schema = (m.schemas || []).find((s) => s["schema-id"] === m["current-schema-id"]) || { fields: [] };
  const byId = new Map(flatFields(schema.fields, "").map((f) => [f.id, f.path]));
  const spec = (m["partition-specs"] || []).find((s) => s["spec-id"] === m["default-spec-id"]) || { fields: [] };
  const order = (m["sort-orders"] || []).find((o) => o["order-id"] === m["default-sort-order-id"]) || { fields: [] };
  const snaps = m.snapshots || [];
  const recent = snaps.slice(-50).reverse();
  return [
    crumbs([["#/", "warehouses"], [`#/w/${encodeURIComponent(wh)}`, wh], [nsHref(wh, levels), levels.join(".")], [null, name]]),
    section(
      `Table ${levels.join(".")}.${name}`,
      table(
        ["", ""],
        [
          ["format version", String(m["format-version"])],
          ["table uuid", el("code", {}, m["table-uuid"])],
          ["location", el("code", {}, m.location)],
          ["metadata", el("code", {}, loaded["metadata-location"])],
          ["snapshots", el("span", { id: "snapshot-count" }, String(snaps.length))],
        ]
      )
    ),
    section(
      "Schema",
      table(
        ["id", "field", "type", "required", "doc"],
        flatFields(schema.fields, "").map((f) => [String(f.id), f.path, typeName(f.type), f.required ? "yes" : "no", f.doc || ""]),
        { id: "schema" }
      ),
      el("h2", { style: "margin-top:14px" }, "Schema history"),
      table(["schema id", "fields", "added", "dropped"], schemaHistory(m.schemas || []))
    ),
    el(
      "div",
      { class: "grid" },
      section(
        "Partition spec",
        spec.fields.length
          ? table(["field", "source", "transform", "id"], spec.fields.map((f) => [f.name, byId.get(f["source-id"]) || String(f["source-id"]), f.transform, String(f["field-id"])]))
          : el("p", {}, "unpartitioned")
      ),
      section(
        "Sort order",
        order.fields.length
          ? table(["source", "transform", "direction", "nulls"], order.fields.map((f) => [byId.get(f["source-id"]) || String(f["source-id"]), f.transform, f.direction, f["null-order"]]))
          : el("p", {}, "unsorted")
      )
    ),
    section("Snapshots", ...snapshotChart(snaps)),
    el(
      "div",
      { class: "grid" },
      section(
        "Refs",
        table(["ref", "type", "snapshot"], Object.entries(m.refs || {}).map(([k, r]) => [k, r.type, el("code", {}, String(r["snapshot-id"]))]))
      ),
      section(
        "Properties",
        table(["key", "value"], Object.entries(m.properties || {}).map(([k, v]) => [el("code", {}, k), el("code", {}, v)]), { id: "properties" })
      )
    ),
    section(
      "Recent snapshots",
      table(
        ["snapshot", "time", "operation", "records added", "files added"],
        recent.map((s) => [el("code", {}, String(s["snapshot-id"])), fmtTime(s["timestamp-ms"]), (s.summary || {}).operation || "", (s.summary || {})["added-records"] || "", (s.summary || {})["added-data-files"] || ""])
      )
    ),
    replicationSection(levels, name, replication),
    section(
      "Recent changes (audit trail)",
      audit.error ? el("p", { class: "refused" }, audit.error) : table(["time", "principal", "operation", "face", "what"], auditRows(audit.entries), { id: "table-audit" })
    ),
  ];
}

async function pageView(wh, levels, name) {
  const path = `/v1/${encodeURIComponent(wh)}/namespaces/${nsPath(levels)}/views/${encodeURIComponent(name)}`;
  const loaded = await api("GET", path);
  const m = loaded.metadata;
  const current = (m.versions || []).find((v) => v["version-id"] === m["current-version-id"]) || { representations: [] };
  return [
    crumbs([["#/", "warehouses"], [`#/w/${encodeURIComponent(wh)}`, wh], [nsHref(wh, levels), levels.join(".")], [null, name]]),
    section(`View ${levels.join(".")}.${name}`, table(["dialect", "SQL"], current.representations.map((r) => [r.dialect, el("code", {}, r.sql)]))),
    section("Versions", table(["version", "time"], (m.versions || []).map((v) => [String(v["version-id"]), fmtTime(v["timestamp-ms"])]))),
    section("Properties", table(["key", "value"], Object.entries(m.properties || {}).map(([k, v]) => [k, v]))),
  ];
}

async function pageTrash(wh) {
  const base = `/v1/${encodeURIComponent(wh)}/trash`;
  const dropped = await apiAll(base, "dropped");
  const rows = dropped.map((d) => {
    const ident = d.identifier.namespace.join(".") + "." + d.identifier.name;
    const as = el("input", { placeholder: "restore as ns.name (optional)", "data-restore-as": ident });
    const undrop = el("button", { "data-undrop": ident }, "Undrop");
    undrop.addEventListener("click", async () => {
      showError("");
      const body = {};
      if (as.value.trim()) {
        const parts = as.value.trim().split(".");
        body.destination = { namespace: parts.slice(0, -1), name: parts[parts.length - 1] };
      }
      try {
        const r = await api("POST", `${base}/${d.id}/restore`, body);
        notice(`Restored ${r.identifier.namespace.join(".")}.${r.identifier.name}`);
        route();
      } catch (e) {
        showError(e.message);
      }
    });
    const purge = el("button", { class: "danger", "data-purge": ident }, "Purge now");
    purge.addEventListener("click", async () => {
      if (!confirm(`Purge ${ident} for good?`)) return;
      try {
        await api("DELETE", `${base}/${d.id}`);
        notice(`Purged ${ident}`);
        route();
      } catch (e) {
        showError(e.message);
      }
    });
    return [ident, d.kind, d["dropped-by"] || "", fmtTime(d["dropped-at-ms"]), fmtTime(d["expires-at-ms"]), el("span", {}, as, " ", undrop, " ", purge)];
  });
  return [
    crumbs([["#/", "warehouses"], [`#/w/${encodeURIComponent(wh)}`, wh], [null, "trash"]]),
    section("Dropped tables and views", table(["name", "kind", "dropped by", "dropped", "purged after", ""], rows, { id: "trash" })),
  ];
}

async function pageAudit(wh) {
  const data = await api("GET", `/v1/${encodeURIComponent(wh)}/audit?pageSize=100`);
  return [
    crumbs([["#/", "warehouses"], [`#/w/${encodeURIComponent(wh)}`, wh], [null, "audit trail"]]),
    section("Audit trail", table(["time", "principal", "operation", "face", "what"], auditRows(data.entries), { id: "audit" })),
  ];
}

async function pageUsers() {
  const data = await api("GET", "/admin/users");
  const name = el("input", { id: "new-user", placeholder: "user name" });
  const create = el("button", { id: "create-user" }, "Create user");
  create.addEventListener("click", async () => {
    try {
      await api("POST", "/admin/users", { name: name.value.trim() });
      location.hash = `#/admin/u/${encodeURIComponent(name.value.trim())}`;
    } catch (e) {
      showError(e.message);
    }
  });
  return [
    section("Users", table(["user"], data.users.map((u) => [link(`#/admin/u/${encodeURIComponent(u)}`, u, { "data-user": u })]), { id: "users" })),
    section("New user", el("p", {}, name, " ", create)),
  ];
}

async function pageUser(user) {
  const base = `/admin/users/${encodeURIComponent(user)}`;
  const u = await api("GET", base);
  const keyRows = u["access-keys"].map((k) => {
    const del = el("button", { class: "danger" }, "Delete");
    del.addEventListener("click", async () => {
      try {
        await api("DELETE", `${base}/access-keys/${encodeURIComponent(k)}`);
        route();
      } catch (e) {
        showError(e.message);
      }
    });
    return [el("code", {}, k), del];
  });
  const newKey = el("button", { id: "create-key" }, "Create access key");
  newKey.addEventListener("click", async () => {
    try {
      const k = await api("POST", `${base}/access-keys`);
      await route();
      notice(`New key ${k["access-key-id"]}; its secret is shown once: ${k["secret-access-key"]}`);
    } catch (e) {
      showError(e.message);
    }
  });
  const policyRows = Object.entries(u.policies).map(([p, doc]) => {
    const del = el("button", { class: "danger" }, "Delete");
    del.addEventListener("click", async () => {
      try {
        await api("DELETE", `${base}/policies/${encodeURIComponent(p)}`);
        route();
      } catch (e) {
        showError(e.message);
      }
    });
    return [p, el("pre", { class: "mono" }, JSON.stringify(doc, null, 2)), del];
  });
  const pname = el("input", { id: "policy-name", placeholder: "policy name" });
  const pdoc = el("textarea", { id: "policy-doc" });
  pdoc.value = JSON.stringify({ Version: "2012-10-17", Statement: [{ Effect: "Allow", Action: ["s3tables:Get*", "s3tables:List*"], Resource: "*" }] }, null, 2);
  const put = el("button", { id: "put-policy" }, "Save policy");
  put.addEventListener("click", async () => {
    try {
      await api("PUT", `${base}/policies/${encodeURIComponent(pname.value.trim())}`, JSON.parse(pdoc.value));
      route();
    } catch (e) {
      showError(e.message);
    }
  });
  // An engine the operator trusts to apply the read restrictions its table loads carry (it then
  // reads tables' files whole); see docs/planning.md, "Read restrictions and trusted engines".
  const trusted = el("input", { type: "checkbox", id: "trusted-engine" });
  trusted.checked = u["trusted-engine"] === true;
  trusted.addEventListener("change", async () => {
    try {
      await api("PATCH", base, { "trusted-engine": trusted.checked });
      route();
    } catch (e) {
      trusted.checked = !trusted.checked;
      showError(e.message);
    }
  });
  const delUser = el("button", { class: "danger", id: "delete-user" }, "Delete user");
  delUser.addEventListener("click", async () => {
    if (!confirm(`Delete ${user} and every key?`)) return;
    try {
      await api("DELETE", base);
      location.hash = "#/admin";
    } catch (e) {
      showError(e.message);
    }
  });
  return [
    crumbs([["#/admin", "users"], [null, user]]),
    section(`Access keys of ${user}`, table(["key", ""], keyRows, { id: "keys" }), el("p", {}, newKey)),
    section("Policies", table(["name", "document", ""], policyRows, { id: "policies" }), el("p", {}, pname), pdoc, el("p", {}, put)),
    section("Trusted engine", el("p", {}, el("label", {}, trusted, " applies the read restrictions of the tables it loads itself, and reads their files whole"))),
    section("Danger", delUser),
  ];
}

// ---- routing ---------------------------------------------------------------------------------

async function route() {
  if (!token()) return renderLogin();
  $("nav").hidden = false;
  $("sign-out").hidden = false;
  $("who").textContent = "signed in as " + (sessionStorage.getItem("catalog-who") || "");
  showError("");
  if (sessionStorage.getItem("catalog-via") === "oidc" && !(await providerRole())) return;
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  const view = $("view");
  view.replaceChildren(el("p", { id: "loading" }, "Loading…"));
  try {
    let nodes;
    if (parts[0] === "admin") nodes = parts[1] === "u" ? await pageUser(parts[2]) : await pageUsers();
    else if (parts[0] === "w" && parts[2] === "trash") nodes = await pageTrash(parts[1]);
    else if (parts[0] === "w" && parts[2] === "audit") nodes = await pageAudit(parts[1]);
    else if (parts[0] === "w" && parts[2] === "ns") {
      const levels = parts[3].split(".");
      if (parts[4] === "t") nodes = await pageTable(parts[1], levels, parts[5]);
      else if (parts[4] === "v") nodes = await pageView(parts[1], levels, parts[5]);
      else nodes = await pageNamespace(parts[1], levels);
    } else if (parts[0] === "w") nodes = await pageNamespace(parts[1], []);
    else nodes = await pageWarehouses();
    view.replaceChildren(...nodes, el("span", { id: "ready", hidden: "" }));
  } catch (e) {
    view.replaceChildren(el("span", { id: "ready", hidden: "" }));
    if (token()) showError(e.message);
  }
}

$("sign-out").addEventListener("click", () => signOut(""));
window.addEventListener("hashchange", () => {
  notice("");
  route();
});
start();
