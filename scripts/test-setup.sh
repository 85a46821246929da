#!/usr/bin/env bash
# Runs before `npm test`: the tests drive real tools from Debian's packages: headless Chromium
# (dashboard end-to-end tests) and promtool from the prometheus package (the exposition check).
# Installs whichever is missing when we can (root with apt-get); otherwise says what to install.
set -euo pipefail
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "test setup: installing ${missing[*]} for the tests"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  exit 0
fi
echo "test setup: missing Debian packages: ${missing[*]} (apt-get install -y ${missing[*]})" >&2
echo "            the dashboard browser tests and the promtool check need them" >&2
