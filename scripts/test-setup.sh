#!/usr/bin/env bash
# Runs before `npm test`: the tests drive real tools from Debian's packages: headless Chromium
# (dashboard end-to-end tests), promtool from the prometheus package (the exposition check) and
# redis-server (the Redis storage engine's suites start their own on a free port).
# Installs whichever is missing when we can (root with apt-get); otherwise says what to install.
set -euo pipefail
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "test setup: installing ${missing[*]} for the tests"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  exit 0
fi
echo "test setup: missing Debian packages: ${missing[*]} (apt-get install -y ${missing[*]})" >&2
echo "            the dashboard browser tests, the promtool check and the Redis suites need them" >&2
