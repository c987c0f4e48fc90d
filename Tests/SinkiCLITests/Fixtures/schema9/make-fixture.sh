#!/usr/bin/env bash
# How this folder was made, with the release before the three trees (state schema 9, commit 6c87a00):
# agent b's state database with local changes queued in its outbox (an edit, a delete, a rename, a
# new file, a new empty folder, made while the server was away) and a remote change kept as not
# applied (a's edit of a file another program held open on b), the server data it belongs to, and
# b's root as it was then. Run from a scratch folder: BIN=/path/to/that/sinkid make-fixture.sh
set -euo pipefail
BIN=${BIN:?the sinkid of the release before the three trees}
W=$(pwd)/work; rm -rf "$W"; mkdir -p "$W"/{a,b}/SaveGames
PORT=47811
"$BIN" serve --listen 127.0.0.1:$PORT --data "$W/server-data" --log-level debug 2> "$W/server.log" & SP=$!
for i in $(seq 50); do [ -f "$W/server-data/first-token" ] && break; sleep 0.2; done
cp "$W/server-data/first-token" "$W/a.token"; chmod 600 "$W/a.token"
"$BIN" serve token add owner --device b --data "$W/server-data" | tail -1 > "$W/b.token"; chmod 600 "$W/b.token"
agent() { "$BIN" --root "$W/$1/SaveGames" --server http://127.0.0.1:$PORT --state "$W/$1/state" --device $1 --log-level debug --token-file "$W/$1.token" 2>> "$W/$1.log" & }
agent a; AP=$!
agent b; BP=$!
sleep 2
cd "$W/a/SaveGames"
printf 'one\n' > kept.txt; printf 'to edit\n' > edited.txt; printf 'to delete\n' > deleted.txt; printf 'to rename\n' > renamed.txt
mkdir -p folder/inner; printf 'held open\n' > folder/inner/busy.txt; printf 'deep\n' > folder/inner/deep.txt
cd - > /dev/null
for i in $(seq 100); do [ -f "$W/b/SaveGames/folder/inner/deep.txt" ] && [ -f "$W/b/SaveGames/renamed.txt" ] && break; sleep 0.1; done
sleep 2
# b's copy of busy.txt is held open for writing by another program: a's edit of it cannot be applied.
python3 -c 'import time,sys; f=open(sys.argv[1],"a"); time.sleep(60)' "$W/b/SaveGames/folder/inner/busy.txt" & HOLD=$!
sleep 0.5
printf 'held open, edited on a\n' > "$W/a/SaveGames/folder/inner/busy.txt"
sleep 3
kill $SP; wait $SP || true
# Changes on b while the server is away: queued in b's outbox.
cd "$W/b/SaveGames"
printf 'edited on b\n' > edited.txt; rm deleted.txt; mv renamed.txt renamed-to.txt; printf 'new on b\n' > new.txt; mkdir empty-folder
cd - > /dev/null
sleep 3
kill $BP; wait $BP || true
kill $AP; wait $AP || true
kill $HOLD || true
# No path of the machine it was made on; no WAL beside the server's database. (Git keeps no empty
# folder: the test makes empty-folder again.)
sqlite3 "$W/b/state/state.db" "UPDATE unapplied SET reason = replace(reason, '$W/b/', ''); VACUUM;"
sqlite3 "$W/server-data/records.db" "PRAGMA wal_checkpoint(TRUNCATE); VACUUM;"
mkdir -p out/state out/server-data
cp "$W/b/state/state.db" out/state/ && cp "$W/server-data/records.db" out/server-data/ && cp -a "$W/b/SaveGames" out/SaveGames
