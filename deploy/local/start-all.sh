#!/bin/sh
# Start every voter of a local quorum in the background:  start-all.sh quorum-3.env
# Logs go to $RAFTMETA_DATA_ROOT/node-ID.log, pids to $RAFTMETA_DATA_ROOT/node-ID.pid;
# stop-all.sh stops them. (`raftmeta quorum up` does the same with generated ports.)
set -eu
if [ $# -lt 1 ]; then
    echo "usage: $0 QUORUM_ENV_FILE [raftmeta node options...]" >&2
    exit 2
fi
env_file=$1
shift
here=$(dirname "$0")
# shellcheck disable=SC1090
. "$env_file"
mkdir -p "$RAFTMETA_DATA_ROOT"
for node_id in $(printf '%s\n' "$RAFTMETA_VOTERS" | tr ',' '\n' | sed 's/@.*//'); do
    "$here/run-node.sh" "$env_file" "$node_id" "$@" >>"$RAFTMETA_DATA_ROOT/node-$node_id.log" 2>&1 &
    echo $! >"$RAFTMETA_DATA_ROOT/node-$node_id.pid"
    echo "node $node_id: pid $!, log $RAFTMETA_DATA_ROOT/node-$node_id.log"
done
bootstrap=$(printf '%s\n' "$RAFTMETA_VOTERS" | tr ',' '\n' | sed 's/^[0-9]*@//' | paste -sd, -)
echo "bootstrap server: $bootstrap"
