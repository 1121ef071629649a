#!/bin/sh
# The web console's browser test drives Debian's Chromium (Playwright's own browser builds come
# from a CDN this project does not use). Installed only when missing; needs root.
set -e
for name in chromium chromium-browser; do
    if command -v "$name" >/dev/null 2>&1; then exit 0; fi
done
if [ "$(id -u)" -ne 0 ]; then
    echo "the console's browser test needs Chromium: apt-get install chromium (as root)" >&2
    exit 1
fi
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium
