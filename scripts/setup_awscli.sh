#!/usr/bin/env bash
# Creates .venv-awscli with the pinned AWS CLI v1, for the tests that run `aws s3tables`.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-awscli
PYTHON=${PYTHON:-python3.11}
STAMP=$VENV/.installed-$(cat requirements-awscli.txt requirements-awscli-lock.txt | sha256sum | cut -c1-16)
[ -f "$STAMP" ] && exit 0
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q --no-compile -r requirements-awscli.txt -c requirements-awscli-lock.txt 2>&1 | grep -v "is ignored" >&2 || true
"$VENV/bin/aws" --version >/dev/null
touch "$STAMP"
