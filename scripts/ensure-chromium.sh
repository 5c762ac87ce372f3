#!/bin/sh
# The browser tests drive Debian's Chromium with playwright-core. This installs it when it is
# missing (apt-get, as root or through passwordless sudo) and fails saying why when it cannot.
# Test files may call it at the same time: a lock lets one install while the others wait.
set -eu

CHROMIUM=/usr/bin/chromium
[ -x "$CHROMIUM" ] && exit 0

exec 9>"${TMPDIR:-/tmp}/plinth-ensure-chromium.lock"
flock 9
[ -x "$CHROMIUM" ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  as_root=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root="sudo -n"
else
  echo "ensure-chromium: $CHROMIUM is missing and installing it needs root: run 'apt-get install chromium' as root" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-chromium: $CHROMIUM is missing and this system has no apt-get: install Chromium at $CHROMIUM" >&2
  exit 1
fi

echo "ensure-chromium: installing Debian's chromium for the browser tests (a few minutes)" >&2
export DEBIAN_FRONTEND=noninteractive
$as_root apt-get update -qq
$as_root apt-get install -y -qq --no-install-recommends chromium >/dev/null
if [ ! -x "$CHROMIUM" ]; then
  echo "ensure-chromium: apt-get finished but $CHROMIUM is not there" >&2
  exit 1
fi
