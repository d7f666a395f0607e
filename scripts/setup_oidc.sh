#!/usr/bin/env bash
# The OpenID Connect provider of the tests and local runs (infra/oidc: node oidc-provider, pinned by
# its package-lock.json) into infra/oidc/node_modules. Idempotent: stamped by the lock's hash.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=infra/oidc
STAMP=$DIR/node_modules/.installed-$(sha256sum "$DIR/package-lock.json" | cut -c1-16)
[ -f "$STAMP" ] && exit 0

if ! command -v node > /dev/null || ! command -v npm > /dev/null; then
  if [ "$(id -u)" = "0" ] && command -v apt-get > /dev/null; then
    echo "setup_oidc: installing nodejs and npm with apt-get" >&2
    # `make setup` runs this beside setup_browser.sh, which may hold apt's locks: wait for them.
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      if apt-get -o DPkg::Lock::Timeout=120 update -qq \
        && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 install -y -qq \
          --no-install-recommends nodejs npm > /dev/null; then
        break
      fi
      sleep 10
    done
  fi
fi
if ! command -v node > /dev/null || ! command -v npm > /dev/null; then
  echo "setup_oidc: Node.js (>= 20.18) and npm are needed for infra/oidc: install them (Debian: apt-get install nodejs npm)" >&2
  exit 1
fi
# oidc-provider 9 uses URL.parse (node >= 20.18 / 22.1).
if ! node -e 'process.exit(typeof URL.parse === "function" ? 0 : 1)'; then
  echo "setup_oidc: node $(node --version) is too old for oidc-provider 9: Node.js >= 20.18 is needed" >&2
  exit 1
fi

rm -rf "$DIR/node_modules"
(cd "$DIR" && npm ci --prefer-offline --no-audit --no-fund --ignore-scripts --loglevel=error > /dev/null)
if ! (cd "$DIR" && node --input-type=module -e 'await import("oidc-provider")' > /dev/null 2>&1); then
  echo "setup_oidc: oidc-provider does not load after npm ci in $DIR" >&2
  exit 1
fi
touch "$STAMP"
