#!/usr/bin/env bash
# Runs before `npm test`: the tests drive real tools from Debian's packages: headless Chromium
# (dashboard end-to-end tests), promtool from the prometheus package (the exposition check) and
# redis-server (the Redis storage engine's suites start their own on a free port), haproxy and
# nginx (test/load-balancer.test.ts runs docs/deployment.md's example configs on free ports).
# No system service is started: the tests run each tool on a scratch config and stop it by pid.
# Installs whichever is missing when we can (root with apt-get); otherwise says what to install.
set -euo pipefail
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "test setup: installing ${missing[*]} for the tests"
  # Packages such as nginx start their service on installation unless policy-rc.d says no.
  policy=/usr/sbin/policy-rc.d
  added_policy=no
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && added_policy=yes
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  if [ "$added_policy" = yes ]; then rm -f "$policy"; fi
  exit 0
fi
echo "test setup: missing Debian packages: ${missing[*]} (apt-get install -y ${missing[*]})" >&2
echo "            the dashboard browser tests, the promtool check, the Redis suites and the load-balancer test need them" >&2
