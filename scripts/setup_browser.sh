#!/usr/bin/env bash
# Headless Chromium and ChromeDriver from the distribution's packages, for the catalog browser tests.
set -euo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  exit 0
fi
if ! command -v apt-get > /dev/null; then
  echo "setup_browser: install Chromium and ChromeDriver (Debian: chromium chromium-driver)" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
echo "setup_browser: installing chromium and chromium-driver with apt-get"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver > /dev/null
/usr/bin/chromium --version
