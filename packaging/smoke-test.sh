#!/usr/bin/env bash
# Runs the installed sinki as a user would: a server and two agents on real folders on 127.0.0.1,
# one file synced from one to the other, sinkid status on both, each process stopped by its pid.
# Usage: packaging/smoke-test.sh [SINKID] (default /usr/bin/sinkid).
set -euo pipefail
sinkid="${1:-/usr/bin/sinkid}"
work="$(mktemp -d)"
pids=()
stop_all() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap stop_all EXIT
fail() { echo "smoke test: $*" >&2; tail -n 20 "$work"/*.log >&2 || true; exit 1; }

# Waits up to $1 tenths of a second for the command after it to succeed.
wait_for() {
    local tenths="$1"; shift
    for _ in $(seq "$tenths"); do "$@" && return 0; sleep 0.1; done
    return 1
}

"$sinkid" serve --listen 127.0.0.1:0 --data "$work/server" 2> "$work/server.log" &
server=$!; pids+=("$server")
listening() { grep -q '(port [0-9]*)' "$work/server.log"; }
wait_for 100 listening || fail "the server did not start"
port="$(grep -o '(port [0-9]*)' "$work/server.log" | head -n1 | grep -o '[0-9]*')"

# As a user deploys it: the server made a first user and wrote its device token for a; b gets a
# device token of its own, added beside the running server (its last line is the token).
[ -s "$work/server/first-token" ] || fail "the server wrote no first device token"
cp "$work/server/first-token" "$work/token-a"
"$sinkid" serve token add owner --device b --data "$work/server" 2> "$work/token-add.log" | tail -n1 > "$work/token-b" \
    || fail "sinkid serve token add failed"
[ -s "$work/token-b" ] || fail "sinkid serve token add printed no token"
chmod 600 "$work/token-a" "$work/token-b"

for name in a b; do
    mkdir -p "$work/$name/SaveGames"
    "$sinkid" --root "$work/$name/SaveGames" --server "http://127.0.0.1:$port" --state "$work/$name/state" \
        --device "$name" --token-file "$work/token-$name" 2> "$work/agent-$name.log" &
    pids+=("$!")
    scanned() { grep -q 'scanned ' "$work/agent-$1.log"; }
    wait_for 100 scanned "$name" || fail "agent $name did not start"
done

echo "level 1" > "$work/a/SaveGames/player1.save"
arrived() { [ "$(cat "$work/b/SaveGames/player1.save" 2>/dev/null)" = "level 1" ]; }
wait_for 100 arrived || fail "player1.save did not reach b"
"$sinkid" status --state "$work/b/state" | grep -q 'agent: up to date' || fail "status on b is not up to date"
"$sinkid" status --json --state "$work/a/state" | grep -q '"running":true' || fail "status --json on a"

# Stop each by its pid; each exits 0.
for pid in "${pids[@]}"; do
    kill -TERM "$pid"
    wait "$pid" || fail "process $pid exited $?"
done
pids=()
"$sinkid" status --state "$work/a/state" > /dev/null && fail "status with no agent running exited 0"
echo "smoke test: installed sinkid synced a file between two agents through an installed server"
