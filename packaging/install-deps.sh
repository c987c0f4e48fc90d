#!/usr/bin/env sh
# Installs the Debian packages sinki builds and runs with; with --tests, also what its tests and CI
# need. Runs apt-get through sudo when not root.
#   packaging/install-deps.sh           the C libraries' headers the build links (the README's first command)
#   packaging/install-deps.sh --tests   and the real peers the tests start: PostgreSQL, nginx, openssl,
#                                       zsh and fish, tmux, the tus peers from PyPI, binutils (the fuzz
#                                       and package scripts), e2fsprogs and mount (file systems the
#                                       extended attributes' tests make)
set -eu
tests=""
case "${1:-}" in
    "") ;;
    --tests) tests=1 ;;
    *) echo "install-deps.sh: unknown option $1 (none, or --tests)" >&2; exit 64 ;;
esac
run() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
run apt-get update -qq
packages="pkg-config libcurl4-openssl-dev libuv1-dev libmicrohttpd-dev libsqlite3-dev zlib1g-dev libssl-dev libpq-dev"
if [ -z "$tests" ]; then
    run env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $packages
    exit 0
fi
# nginx (the TLS proxy the proxy test runs the agent through, started by the test on a port of its own)
# and postgresql (the server binaries the PostgreSQL store's tests run a private cluster of, in a
# temporary folder on a port of its own) must not start their system services at install: a
# policy-rc.d that says no is put in place for the install when there is none. zsh and fish run the
# completion scripts' tests; tmux is the real terminal the tests of what people see type into; the
# extended attributes' tests (run as root, as CI runs) mount an ext4 image of their own (mkfs.ext4) and ramfs.
policy=/usr/sbin/policy-rc.d
made_policy=""
if [ ! -e "$policy" ] && { ! command -v nginx > /dev/null || [ ! -d /usr/lib/postgresql ]; }; then
    run sh -c "printf '#!/bin/sh\nexit 101\n' > $policy && chmod 755 $policy"
    made_policy=1
fi
run env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    $packages postgresql curl python3 python3-venv binutils nginx openssl zsh fish tmux e2fsprogs mount
if [ -n "$made_policy" ]; then run rm -f "$policy"; fi
# The tus peers the interop tests run against (tuspy, tuspyserver under uvicorn), from PyPI, in a virtual
# environment at the repository's root that the tests find (.venv, ignored by git).
repo="$(cd "$(dirname "$0")/.." && pwd)"
[ -x "$repo/.venv/bin/python" ] || python3 -m venv "$repo/.venv"
"$repo/.venv/bin/pip" install -q --disable-pip-version-check tuspy tuspyserver uvicorn fastapi
