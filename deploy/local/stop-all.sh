#!/bin/sh
# Stop the voters started by start-all.sh (SIGTERM: a leader resigns first), waiting up to 15 s.
set -eu
if [ $# -lt 1 ]; then
    echo "usage: $0 QUORUM_ENV_FILE" >&2
    exit 2
fi
# shellcheck disable=SC1090
. "$1"
for pid_file in "$RAFTMETA_DATA_ROOT"/node-*.pid; do
    [ -e "$pid_file" ] || continue
    pid=$(cat "$pid_file")
    if kill -TERM "$pid" 2>/dev/null; then
        i=0
        while kill -0 "$pid" 2>/dev/null && [ $i -lt 150 ]; do
            sleep 0.1
            i=$((i + 1))
        done
    fi
    rm -f "$pid_file"
done
