"""Generated protobuf and gRPC code for proto/raftmeta/v1 (do not edit; run `make proto`)."""
