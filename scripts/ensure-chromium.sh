#!/bin/sh
# Makes sure Debian's chromium is at /usr/bin/chromium for the console's browser tests (playwright-core
# drives it; no test tool ever downloads a browser). Idempotent: nothing happens when it is there. Missing
# and root: apt-get installs it. Missing otherwise: a clear failure (the browser suite then fails, never skips).
set -eu
CHROMIUM=/usr/bin/chromium
if [ -x "$CHROMIUM" ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "ensure-chromium: $CHROMIUM is missing and this is not root, so it cannot be installed here." >&2
  echo "ensure-chromium: install Debian's chromium as root (apt-get install -y chromium), then run the tests again." >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-chromium: $CHROMIUM is missing and there is no apt-get: install Debian's chromium package by hand." >&2
  exit 1
fi
echo "ensure-chromium: installing Debian's chromium (apt-get)..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >&2
apt-get install -y -q chromium >&2
if [ ! -x "$CHROMIUM" ]; then
  echo "ensure-chromium: apt-get finished but $CHROMIUM is still missing." >&2
  exit 1
fi
