#!/usr/bin/env bash
# Runs before `npm test`: the dashboard's end-to-end tests drive Debian's headless Chromium.
# Installs it when missing and we can (root with apt-get); otherwise says what to install.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "test setup: installing chromium for the dashboard browser tests"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  exit 0
fi
echo "test setup: /usr/bin/chromium is missing; install Debian's chromium package (apt-get install -y chromium)" >&2
echo "            or the dashboard end-to-end tests will fail" >&2
