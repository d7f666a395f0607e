#!/usr/bin/env bash
# Creates .venv-localstack (Python 3.13) with pinned LocalStack. Exits 0 without it when no
# Python 3.13 exists: the run and test commands then fall back to an embedded moto server.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-localstack
STAMP=$VENV/.installed-$(cat requirements-localstack.txt requirements-localstack-lock.txt | sha256sum | cut -c1-16)
[ -f "$STAMP" ] && exit 0

find_py313() {
  for cand in "${PYTHON313:-}" python3.13 "$HOME"/.pyenv/versions/3.13*/bin/python3.13 /usr/local/bin/python3.13 /usr/bin/python3.13; do
    [ -n "$cand" ] || continue
    if "$cand" -c 'import sys; assert sys.version_info[:2] == (3, 13)' >/dev/null 2>&1; then
      echo "$cand"; return 0
    fi
  done
  return 1
}

if ! PY=$(find_py313); then
  echo "setup_localstack: no Python 3.13 found; LocalStack cannot run here, an embedded moto S3 will be used instead." >&2
  exit 0
fi
echo "setup_localstack: installing LocalStack into $VENV with $PY" >&2
rm -rf "$VENV"
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q --no-compile -r requirements-localstack.txt -c requirements-localstack-lock.txt 2>&1 | grep -v "is ignored" >&2 || true
"$VENV/bin/python" -c 'import localstack.runtime.main' 
touch "$STAMP"
