"""Identity providers' JWTs, validated as OpenID Connect Discovery and RFC 7515/7519/8725 require.

The issuer (`iss`) must be a provider the catalog trusts (auth/providers.py); its keys come from
its discovery document's `jwks_uri`, cached, and fetched again when a token names a key id the
cache lacks, at most once per REFRESH_S per provider (forged key ids cannot flood the provider);
when the provider is down the cached keys keep serving and an unknown key is refused. Only the
signature algorithms of the key's type verify (never `none`, never HMAC with a public key), then
`iss`, `aud` (one of the provider's client ids), `exp` and `nbf` with SKEW_S of clock skew.
joserfc does the JOSE work; it and `cryptography` are imported when the first token arrives.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from chalicelib.auth import providers
from chalicelib.auth.providers import Provider
from chalicelib.caches import Cache
from chalicelib.core.primitives.context import Context
from chalicelib.errors import InvalidIdentityToken

log = logging.getLogger("catalog.webtokens")
SKEW_S = 60
MAX_TOKEN_BYTES = 16_384
REFRESH_S = float(os.environ.get("CATALOG_JWKS_REFRESH_S", "30"))  # least time between fetches of one provider
KEYS_TTL_S = float(os.environ.get("CATALOG_JWKS_TTL_S", "3600"))  # then keys are fetched again (kept if it fails)
FETCH_TIMEOUT_S = 3.0
MAX_DOCUMENT_BYTES = 512 * 1024
# The algorithms each key type verifies (RFC 7518, RFC 8037): a key never verifies another family's.
ALGORITHMS = {
    "RSA": ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512"),
    "EC": ("ES256", "ES384", "ES512"),
    "OKP": ("EdDSA",),
}
_CURVES = {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512"}
TAGS_CLAIM = "https://aws.amazon.com/tags"
MAX_TIME = 32_503_680_000  # 3000-01-01: a NumericDate beyond it (or not finite) is refused


class ExpiredIdentityToken(InvalidIdentityToken):
    """The provider's token is past its expiry (STS answers ExpiredTokenException)."""


@dataclass(frozen=True)
class Verified:
    provider: Provider
    claims: dict[str, Any]

    @property
    def subject(self) -> str:
        return str(self.claims.get("sub") or "")

    @property
    def audience(self) -> str:
        aud = self.claims.get("aud")
        return aud if isinstance(aud, str) else next((a for a in aud or () if a in self.provider.client_ids), "")

    def context(self) -> dict[str, Any]:
        """The claims as trust policy condition keys: `<provider host/path>:<claim>` (as in AWS,
        `:aud` is the audience matched; plus the token's other string and string-list claims)."""
        out: dict[str, Any] = {}
        prefix = self.provider.host_path
        for name, value in self.claims.items():
            if isinstance(value, (str, int, float)) and not isinstance(value, bool):
                out[f"{prefix}:{name}"] = str(value)
            elif isinstance(value, bool):
                out[f"{prefix}:{name}"] = "true" if value else "false"
            elif isinstance(value, list) and all(isinstance(v, str) for v in value):
                out[f"{prefix}:{name}"] = list(value)
        out[f"{prefix}:aud"] = self.audience
        return out

    def session_tags(self) -> tuple[dict[str, str], tuple[str, ...]]:
        """AWS's session tags claim: {"principal_tags": {key: [value]}, "transitive_tag_keys": [...]}."""
        doc = self.claims.get(TAGS_CLAIM)
        if doc is None:
            return {}, ()
        if not isinstance(doc, dict):
            raise InvalidIdentityToken(f"The token's {TAGS_CLAIM} claim is not an object")
        principal_tags = doc.get("principal_tags", {})  # present means an object: [] or "" is refused
        if not isinstance(principal_tags, dict):
            raise InvalidIdentityToken(f"The token's {TAGS_CLAIM} principal_tags is not an object")
        tags: dict[str, str] = {}
        for key, value in principal_tags.items():
            values = value if isinstance(value, list) else [value]
            if len(values) != 1 or not isinstance(values[0], str):
                raise InvalidIdentityToken(f"Session tag {str(key)[:60]!r}: exactly one string value")
            tags[str(key)] = values[0]
        transitive = doc.get("transitive_tag_keys", [])
        if not isinstance(transitive, list) or not all(isinstance(k, str) for k in transitive):
            raise InvalidIdentityToken("transitive_tag_keys must be a list of tag keys")
        return tags, tuple(transitive)


def looks_like_jwt(token: str) -> bool:
    return token.startswith("eyJ") and token.count(".") == 2


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _b64json(part: str) -> Any:
    try:
        return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)), parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError):
        raise InvalidIdentityToken("The token is not a JWT: a part is not base64url JSON") from None
    except RecursionError:
        raise InvalidIdentityToken("The token is not a JWT: a part's JSON is nested too deeply") from None


def unverified(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Header and claims before verification (to find the issuer and the key: nothing else)."""
    if len(token) > MAX_TOKEN_BYTES:
        raise InvalidIdentityToken(f"The token is too large ({len(token)} characters; at most {MAX_TOKEN_BYTES})")
    if not looks_like_jwt(token):
        raise InvalidIdentityToken("The token is not a signed JWT (header.payload.signature)")
    header, claims = (_b64json(p) for p in token.split(".")[:2])
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise InvalidIdentityToken("The token's header and claims must be JSON objects")
    return header, claims


def validate(ctx: Context, token: str, now: float | None = None) -> Verified:
    header, claims = unverified(token)
    alg = header.get("alg")
    if not isinstance(alg, str) or alg.lower() == "none" or alg.upper().startswith("HS"):
        raise InvalidIdentityToken(
            f"Signature algorithm {str(alg)[:20]!r} is not accepted: a provider signs with its private key"
        )
    if "crit" in header or "jku" in header or "x5u" in header or "jwk" in header:
        raise InvalidIdentityToken("The token's header names keys or extensions this catalog does not follow")
    issuer = claims.get("iss")
    provider = providers.for_issuer(ctx, issuer) if isinstance(issuer, str) else None
    if provider is None:
        raise InvalidIdentityToken(
            f"Unknown issuer {str(issuer)[:120]!r}: no OpenID Connect provider of this catalog has that URL"
        )
    key = _KEYS.key(provider, header.get("kid"), alg)
    _verify_signature(token, key, alg)
    _check_claims(provider, claims, time.time() if now is None else now)
    return Verified(provider, claims)


def _verify_signature(token: str, key: Any, alg: str) -> None:
    from joserfc import jwt
    from joserfc.errors import JoseError

    try:
        jwt.decode(token, key, algorithms=[alg])
    except JoseError as exc:
        raise InvalidIdentityToken(f"The token's signature does not verify ({exc.error})") from None
    except ValueError:
        raise InvalidIdentityToken("The token's signature does not verify") from None


def _check_claims(provider: Provider, claims: dict[str, Any], now: float) -> None:
    if claims.get("iss") != provider.url and str(claims.get("iss")).rstrip("/") != provider.url.rstrip("/"):
        raise InvalidIdentityToken("The token's issuer is not the provider's URL")
    for name in ("exp", "nbf", "iat"):
        value = claims.get(name)
        if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool)):
            raise InvalidIdentityToken(f"The token's {name} is not a number")
        if value is not None and not 0 <= value <= MAX_TIME:  # NaN, Infinity, 10**400: no time at all
            raise InvalidIdentityToken(f"The token's {name} is not a time (seconds since 1970, before 3000)")
    if claims.get("exp") is None:
        raise InvalidIdentityToken("The token has no expiry (exp)")
    if claims["exp"] + SKEW_S < now:
        raise ExpiredIdentityToken("The token has expired; get a new one from the identity provider")
    if claims.get("nbf") is not None and claims["nbf"] - SKEW_S > now:
        raise InvalidIdentityToken("The token is not valid yet (nbf is in the future)")
    if claims.get("iat") is not None and claims["iat"] - SKEW_S > now:
        raise InvalidIdentityToken("The token was issued in the future (iat)")
    aud = claims.get("aud")
    audiences = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
    if not any(isinstance(a, str) and a in provider.client_ids for a in audiences):
        raise InvalidIdentityToken(
            f"The token's audience {audiences[:3]!r} is none of the provider's client ids (ClientIDList)"
        )
    if not isinstance(claims.get("sub"), str) or not claims["sub"]:
        raise InvalidIdentityToken("The token has no subject (sub)")


class _KeyCache:
    """Per provider: its keys, when they were fetched, and when a fetch was last tried."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # url -> (KeySet, fetched, tried); the refresh rule below decides staleness, not the cache
        self._keys: Cache[str, tuple[Any, float, float]] = Cache("identity providers' signing keys", 1024)
        self._fetching: dict[str, threading.Event] = {}  # url -> set when the fetch under way ends

    def key(self, provider: Provider, kid: Any, alg: str) -> Any:
        if kid is not None and not isinstance(kid, str):
            raise InvalidIdentityToken("The token's kid is not a string")
        now = time.monotonic()
        with self._lock:
            entry = self._keys.get(provider.url)
            found = _pick(entry[0], kid) if entry else None
            stale = entry is None or now - entry[1] > KEYS_TTL_S
            # Never more often than REFRESH_S, whatever key ids arrive, however many at once: the
            # fetch is claimed under the lock; concurrent requests wait for it rather than fetch too.
            fetch = (found is None or stale) and now - (entry[2] if entry else -REFRESH_S) >= REFRESH_S
            pending = self._fetching.get(provider.url)
            if fetch:
                self._keys[provider.url] = (entry[0], entry[1], now) if entry else (None, -KEYS_TTL_S * 2, now)
                pending = self._fetching[provider.url] = threading.Event()
        if fetch and pending is not None:
            try:
                entry = self._refresh(provider, entry, now)
            finally:
                with self._lock:
                    self._fetching.pop(provider.url, None)
                pending.set()
            found = _pick(entry[0], kid) if entry else None
        elif found is None and pending is not None:
            pending.wait(2 * FETCH_TIMEOUT_S + 1)
            with self._lock:
                entry = self._keys.get(provider.url)
            found = _pick(entry[0], kid) if entry else None
        if found is None:
            read = entry is not None and entry[0] is not None
            raise InvalidIdentityToken(
                f"The provider has no signing key {str(kid)[:64]!r} (its JWKS was read "
                f"{'and lacks it' if read else 'never: the provider could not be reached'})"
            )
        kty = found.key_type
        allowed = ALGORITHMS.get(kty, ())
        if kty == "EC":
            allowed = (_CURVES.get(found.as_dict().get("crv", ""), ""),)
        if alg not in allowed or (found.get("alg") and found.get("alg") != alg):
            raise InvalidIdentityToken(f"Algorithm {alg[:20]!r} does not belong to the provider's {kty} key")
        if found.get("use") not in (None, "sig"):
            raise InvalidIdentityToken("The provider's key is not a signing key")
        return found

    def _refresh(self, provider: Provider, entry: tuple[Any, float, float] | None, now: float) -> Any:
        try:
            key_set = _fetch_keys(provider)
        except Exception as exc:  # noqa: BLE001 - a provider that is down or answers nonsense: cached keys serve
            log.warning("identity provider keys not fetched", extra={"provider": provider.url, "error": str(exc)[:200]})
            if entry is None:
                with self._lock:
                    self._keys[provider.url] = (None, -KEYS_TTL_S * 2, now)
                return None
            return entry
        with self._lock:
            self._keys[provider.url] = (key_set, now, now)
        return self._keys[provider.url]

    def clear(self) -> None:
        with self._lock:
            self._keys.clear()


def _pick(key_set: Any, kid: str | None) -> Any:
    if key_set is None:
        return None
    keys = [k for k in key_set.keys if k.kid == kid] if kid else list(key_set.keys)
    return keys[0] if len(keys) == 1 else None  # no kid: only a provider with one key


_KEYS = _KeyCache()


def _get_json(url: str) -> Any:
    import urllib.request  # only when a provider's keys are fetched (~40 ms of imports)

    if not url.startswith(("https://", "http://")):
        raise ValueError(f"not an http(s) URL: {url[:120]}")
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_S) as resp:  # noqa: S310 - scheme checked above
        body = resp.read(MAX_DOCUMENT_BYTES + 1)
    if len(body) > MAX_DOCUMENT_BYTES:
        raise ValueError("document too large")
    return json.loads(body)


def discovery(provider: Provider) -> dict[str, Any]:
    doc = _get_json(provider.url.rstrip("/") + "/.well-known/openid-configuration")
    if not isinstance(doc, dict) or str(doc.get("issuer", "")).rstrip("/") != provider.url.rstrip("/"):
        raise ValueError("the discovery document names another issuer")
    return doc


def _fetch_keys(provider: Provider) -> Any:
    from joserfc.jwk import KeySet

    jwks_uri = discovery(provider).get("jwks_uri")
    if not isinstance(jwks_uri, str):
        raise ValueError("the discovery document has no jwks_uri")
    doc = _get_json(jwks_uri)
    if not isinstance(doc, dict) or not isinstance(doc.get("keys"), list):
        raise ValueError("the JWKS is not {keys: [...]}")
    public = [k for k in doc["keys"] if isinstance(k, dict) and k.get("kty") in ALGORITHMS and "d" not in k]
    return KeySet.import_key_set({"keys": public})


def forget() -> None:
    _KEYS.clear()
