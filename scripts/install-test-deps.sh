#!/usr/bin/env bash
# Installs, from Debian's packages, the real programs the tests run beside permit, when missing:
#   zsh       tests/parser_vs_shells.rs runs every line the gate allows under bash and zsh.
#   chromium  tests/report_browser.rs loads report.html in headless Chromium and screenshots it.
#   redis-server  tests/session_store.rs runs two `permit serve` replicas sharing a real Redis
#             (started and stopped by the test on a loopback port; the package's own service
#             is not needed and is left as the package sets it up).
# Needs root or sudo, and apt. Does nothing when everything is already installed.
set -euo pipefail
missing=()
command -v zsh >/dev/null || missing+=(zsh)
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v redis-server >/dev/null || missing+=(redis-server)
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
echo "installing ${missing[*]} from Debian's packages for the tests" >&2
as_root apt-get update -qq
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
