#!/usr/bin/env sh
# Installs the Debian packages sinki builds and tests with. Runs apt-get through sudo when not root.
set -eu
run() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
run apt-get update -qq
# zsh and fish run the completion scripts' tests; nginx (the TLS proxy the proxy test runs the agent
# through, started by the test on a port of its own)
# and postgresql (the server binaries the PostgreSQL store's tests run a private cluster of, in a
# temporary folder on a port of its own) must not start their system services at install: a
# policy-rc.d that says no is put in place for the install when there is none.
policy=/usr/sbin/policy-rc.d
made_policy=""
if [ ! -e "$policy" ] && { ! command -v nginx > /dev/null || [ ! -d /usr/lib/postgresql ]; }; then
    run sh -c "printf '#!/bin/sh\nexit 101\n' > $policy && chmod 755 $policy"
    made_policy=1
fi
run env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    pkg-config libcurl4-openssl-dev libuv1-dev libmicrohttpd-dev libsqlite3-dev zlib1g-dev libssl-dev \
    libpq-dev postgresql curl python3 python3-venv binutils nginx openssl zsh fish
if [ -n "$made_policy" ]; then run rm -f "$policy"; fi
# The tus peers the interop tests run against (tuspy, tuspyserver under uvicorn), from PyPI, in a virtual
# environment at the repository's root that the tests find (.venv, ignored by git).
repo="$(cd "$(dirname "$0")/.." && pwd)"
[ -x "$repo/.venv/bin/python" ] || python3 -m venv "$repo/.venv"
"$repo/.venv/bin/pip" install -q --disable-pip-version-check tuspy tuspyserver uvicorn fastapi
