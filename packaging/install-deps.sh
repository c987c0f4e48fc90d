#!/usr/bin/env sh
# Installs the Debian packages sinki builds and tests with. Runs apt-get through sudo when not root.
set -eu
run() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
run apt-get update -qq
run env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    pkg-config libcurl4-openssl-dev libuv1-dev libmicrohttpd-dev libsqlite3-dev zlib1g-dev libssl-dev \
    libpq-dev curl python3 python3-venv binutils
# The tus peers the interop tests run against (tuspy, tuspyserver under uvicorn), from PyPI, in a virtual
# environment at the repository's root that the tests find (.venv, ignored by git).
repo="$(cd "$(dirname "$0")/.." && pwd)"
[ -x "$repo/.venv/bin/python" ] || python3 -m venv "$repo/.venv"
"$repo/.venv/bin/pip" install -q --disable-pip-version-check tuspy tuspyserver uvicorn fastapi
