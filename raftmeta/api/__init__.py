"""The ControllerService API as data: one catalogue row per RPC (``raftmeta.api.catalogue``), the
request limits, the error metadata, topic ids and paging that every side of a call shares. Pure:
no IO, so the controller, the node, the client and the Kafka listener can all read it.

Nothing is imported here: the CLI's start-up imports light modules of this package (limits, error
names) without protobuf and gRPC, which the catalogue needs."""
