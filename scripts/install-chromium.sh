#!/usr/bin/env bash
# Install Debian's Chromium where it is missing: the browser tests (tests/browser.py) render
# the status page, the S-curve plot and the offline report in it headless, and
# scripts/screenshots.sh takes the README's pictures with it.
#
# Idempotent: does nothing when `chromium` is on the PATH. Updates apt's package lists only
# when apt does not know the package yet (a fresh image). Without apt-get it says what is
# missing and succeeds: the browser tests then skip, except under CI (CI set), where they fail.
set -euo pipefail

command -v chromium >/dev/null && exit 0
if ! command -v apt-get >/dev/null; then
    echo "install-chromium: no apt-get here; install Chromium yourself (the browser tests skip without it)" >&2
    exit 0
fi
sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
echo "install-chromium: installing Debian's chromium package" >&2
if ! apt-cache show chromium >/dev/null 2>&1; then
    "${sudo[@]}" apt-get update -q
fi
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >&2
