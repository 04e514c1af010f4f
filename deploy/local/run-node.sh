#!/bin/sh
# Run one voter of a local quorum in the foreground:  run-node.sh quorum-3.env 2
# Its address is taken from the voter list, its data dir is $RAFTMETA_DATA_ROOT/node-ID. Extra
# arguments go to `raftmeta node` (e.g. --snapshot-interval-records 5000). Ctrl-C (SIGINT) or
# SIGTERM stops it cleanly; a leader resigns first so the others elect at once.
set -eu
if [ $# -lt 2 ]; then
    echo "usage: $0 QUORUM_ENV_FILE NODE_ID [raftmeta node options...]" >&2
    exit 2
fi
env_file=$1
node_id=$2
shift 2
# shellcheck disable=SC1090
. "$env_file"
address=$(printf '%s\n' "$RAFTMETA_VOTERS" | tr ',' '\n' | sed -n "s/^${node_id}@//p")
if [ -z "$address" ]; then
    echo "node $node_id is not among the voters $RAFTMETA_VOTERS" >&2
    exit 2
fi
exec "${RAFTMETA:-raftmeta}" node \
    --node-id "$node_id" \
    --listen "$address" \
    --voters "$RAFTMETA_VOTERS" \
    --data-dir "$RAFTMETA_DATA_ROOT/node-$node_id" \
    --cluster-id "$RAFTMETA_CLUSTER_ID" \
    "$@"
