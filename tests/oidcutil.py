"""A real OpenID Connect provider for the tests: node oidc-provider (infra/oidc/provider.mjs) in a subprocess.

    with start_provider(tmp_path, clients=[{"client_id": "svc", "client_secret": "s", "scope": "catalog"}]) as op:
        token = op.client_credentials("svc", "s", scope="catalog")["access_token"]

The config keywords are those of infra/oidc/README.md (clients, accounts, ttl, jwks, signing_kid,
audience, resource, auto_login, pkce_required). Access tokens are RS256 JWTs with `kid`, `iss` =
`op.issuer` and `aud` = `op.audience` ("catalog" unless configured). The provider's log (its stdout
and stderr: one line per request, every grant error) is `op.log_path`.
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import http.cookiejar
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import weakref
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OIDC_DIR = ROOT / "infra" / "oidc"
PROVIDER = OIDC_DIR / "provider.mjs"
DEFAULT_AUDIENCE = "catalog"
DEFAULT_RESOURCE = "urn:catalog"

_LIVE: weakref.WeakSet[OidcProvider] = weakref.WeakSet()


class OidcError(Exception):
    """The provider answered an OAuth2 request with an error (`status`, `body` with error/error_description)."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(f"{status}: {body.get('error')}: {body.get('error_description', '')}")
        self.status = status
        self.body = body


def node_binary() -> str:
    node = shutil.which("node") or ("/usr/bin/node" if Path("/usr/bin/node").exists() else None)
    if node is None:
        raise RuntimeError("node (Node.js >= 20.18) is not installed: run `make oidc`")
    return node


def check_installed() -> None:
    """Fail (never skip) with what to run when infra/oidc's node modules are missing."""
    if not (OIDC_DIR / "node_modules" / "oidc-provider" / "package.json").exists():
        raise RuntimeError(f"oidc-provider is not installed in {OIDC_DIR / 'node_modules'}: run `make oidc`")


def rsa_jwk(kid: str) -> dict[str, Any]:
    """A private RSA signing JWK (RS256) for a provider's `jwks` config."""
    from joserfc.jwk import RSAKey

    key = RSAKey.generate_key(2048, parameters={"kid": kid, "alg": "RS256", "use": "sig"}, private=True)
    return dict(key.as_dict(private=True))


def rsa_jwks(*kids: str) -> dict[str, Any]:
    """A private JWKS with one RSA key per kid: `start_provider(tmp_path, jwks=rsa_jwks("a", "b"), signing_kid="b")`."""
    return {"keys": [rsa_jwk(kid) for kid in kids]}


def public_jwks(jwks: dict[str, Any]) -> dict[str, Any]:
    """The public half of a private JWKS (what the provider's jwks_uri serves for it)."""
    private = {"d", "p", "q", "dp", "dq", "qi"}
    return {"keys": [{k: v for k, v in key.items() if k not in private} for key in jwks["keys"]]}


def pkce_pair() -> tuple[str, str]:
    """(code_verifier, S256 code_challenge)."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


class OidcProvider:
    """One oidc-provider process on 127.0.0.1 (a free port unless `port` is given)."""

    def __init__(
        self,
        workdir: str | Path | None = None,
        *,
        port: int = 0,
        startup_timeout: float = 30.0,
        **config: Any,
    ) -> None:
        self.workdir = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="oidc-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config: dict[str, Any] = dict(config)
        self.port = port
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.workdir / "oidc-provider.log"
        self.config_path = self.workdir / "oidc-config.json"
        self.discovery: dict[str, Any] = {}
        self.issuer = ""
        self.audience = str(self.config.get("audience", DEFAULT_AUDIENCE))
        self.resource = str(self.config.get("resource", DEFAULT_RESOURCE))
        self.signing_kid = ""

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> OidcProvider:
        check_installed()
        if self.proc is not None:
            raise RuntimeError("provider already started")
        ready_file = self.workdir / "oidc-ready.json"
        ready_file.unlink(missing_ok=True)
        config = {**self.config, "host": "127.0.0.1", "port": self.port, "ready_file": str(ready_file)}
        self.config_path.write_text(json.dumps(config, indent=1))
        log = open(self.log_path, "ab")  # the child keeps its own descriptor
        try:
            self.proc = subprocess.Popen(
                [node_binary(), str(PROVIDER), str(self.config_path)],
                cwd=OIDC_DIR,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, "NODE_ENV": "test", "OIDC_CONFIG": str(self.config_path)},
            )
        finally:
            log.close()
        _LIVE.add(self)
        try:
            self._wait_ready(ready_file)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, ready_file: Path) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + self.startup_timeout
        while not ready_file.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"oidc provider exited with {self.proc.returncode} at start:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"oidc provider not ready after {self.startup_timeout} s:\n{self.log_tail()}")
            time.sleep(0.02)
        ready = json.loads(ready_file.read_text())
        self.issuer = ready["issuer"]
        self.port = int(ready["port"])
        self.audience = ready["audience"]
        self.resource = ready["resource"]
        self.signing_kid = ready["signing_kid"]
        while True:
            try:
                self.discovery = self._get_json(self.issuer + "/.well-known/openid-configuration")
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"oidc provider discovery does not answer:\n{self.log_tail()}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        _LIVE.discard(self)
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)

    def restart(self, **changes: Any) -> OidcProvider:
        """Stop, then start again on the same port (so the same issuer) with `changes` applied to the
        config: e.g. `restart(jwks=rotated, signing_kid="k2")`. Tokens, grants and sessions are lost."""
        self.stop()
        self.config.update(changes)
        return self.start()

    def __enter__(self) -> OidcProvider:
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    # ------------------------------------------------------------------ endpoints

    @property
    def token_endpoint(self) -> str:
        return str(self.discovery["token_endpoint"])

    @property
    def authorization_endpoint(self) -> str:
        return str(self.discovery["authorization_endpoint"])

    @property
    def jwks_uri(self) -> str:
        return str(self.discovery["jwks_uri"])

    @property
    def discovery_url(self) -> str:
        return self.issuer + "/.well-known/openid-configuration"

    def jwks(self) -> dict[str, Any]:
        """The public JWKS the provider serves now."""
        return self._get_json(self.jwks_uri)

    # ------------------------------------------------------------------ token requests

    def token_request(
        self, form: dict[str, str], *, basic: tuple[str, str] | None = None
    ) -> tuple[int, dict[str, Any]]:
        """POST the form to the token endpoint; (status, JSON body), errors included."""
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
        if basic is not None:
            user, password = (urllib.parse.quote(part, safe="") for part in basic)
            headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        data = urllib.parse.urlencode(form).encode()
        req = urllib.request.Request(self.token_endpoint, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as err:
            body = err.read()
            try:
                return err.code, json.loads(body)
            except ValueError:
                return err.code, {"error": "non_json", "error_description": body.decode(errors="replace")}

    def client_credentials(
        self,
        client_id: str,
        secret: str,
        scope: str | None = None,
        resource: str | None = None,
        auth: str = "basic",
    ) -> dict[str, Any]:
        """The token response of a client_credentials grant; `auth` is "basic" (client_secret_basic, as
        DuckDB sends) or "post" (client_id and client_secret in the form, as PyIceberg and Iceberg Java send).
        Raises OidcError on an error answer."""
        form = {"grant_type": "client_credentials"}
        if scope is not None:
            form["scope"] = scope
        if resource is not None:
            form["resource"] = resource
        if auth == "basic":
            status, body = self.token_request(form, basic=(client_id, secret))
        elif auth == "post":
            status, body = self.token_request({**form, "client_id": client_id, "client_secret": secret})
        else:
            raise ValueError(f"auth must be 'basic' or 'post', not {auth!r}")
        if status != 200:
            raise OidcError(status, body)
        return body

    def authorization_code(
        self,
        client_id: str,
        redirect_uri: str,
        login: str,
        *,
        password: str = "x",
        scope: str = "openid",
        client_secret: str | None = None,
        resource: str | None = None,
        extra: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """The authorization code flow with PKCE (S256) over plain HTTP, as a browser would do it: the
        authorization request, the login form (login + password), the redirect with the code, the token
        request. Returns the token response (access_token, id_token, refresh_token, scope, ...)."""
        verifier, challenge = pkce_pair()
        state = secrets.token_urlsafe(12)
        params = {
            "client_id": client_id,
            "response_type": "code",
            "redirect_uri": redirect_uri,
            "scope": scope,
            "state": state,
            "nonce": secrets.token_urlsafe(12),
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            **(extra or {}),
        }
        if resource is not None:
            params["resource"] = resource
        opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()), _NoRedirect()
        )

        def step(url: str, data: dict[str, str] | None = None) -> str:
            body = urllib.parse.urlencode(data).encode() if data is not None else None
            try:
                with opener.open(urllib.request.Request(url, data=body), timeout=30) as resp:
                    raise OidcError(resp.status, {"error": "no_redirect", "error_description": resp.read().decode()})
            except urllib.error.HTTPError as err:
                if err.code not in (302, 303):
                    raise OidcError(err.code, {"error": "http", "error_description": err.read().decode()}) from None
                return urllib.parse.urljoin(url, err.headers["Location"])

        url = step(self.authorization_endpoint + "?" + urllib.parse.urlencode(params))
        while not url.startswith(redirect_uri):
            if "/interaction/" in url and not url.endswith("/login"):
                try:
                    url = step(url)  # an automatic login (auto_login) redirects at once
                except OidcError as err:
                    if err.status != 200 or 'id="login-form"' not in err.body["error_description"]:
                        raise
                    url = step(url + "/login", {"login": login, "password": password})
            else:
                url = step(url)
        query = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)
        if "error" in query:
            raise OidcError(400, {k: v[0] for k, v in query.items()})
        if query.get("state") != [state]:
            raise OidcError(400, {"error": "state_mismatch"})
        form = {
            "grant_type": "authorization_code",
            "code": query["code"][0],
            "redirect_uri": redirect_uri,
            "code_verifier": verifier,
        }
        if client_secret is None:
            status, body = self.token_request({**form, "client_id": client_id})
        else:
            status, body = self.token_request(form, basic=(client_id, client_secret))
        if status != 200:
            raise OidcError(status, body)
        return body

    @staticmethod
    def _get_json(url: str) -> dict[str, Any]:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return json.loads(resp.read())


def start_provider(tmp_path: str | Path, **config: Any) -> OidcProvider:
    """A started provider whose files (config, log) are in tmp_path/oidc. Stop it with .stop() (or use it
    as a context manager); any still running at interpreter exit are stopped then."""
    return OidcProvider(Path(tmp_path) / "oidc", **config).start()


@atexit.register
def _stop_all() -> None:
    for provider in list(_LIVE):
        provider.stop()
