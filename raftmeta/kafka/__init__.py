"""Kafka wire-protocol admin listener: Kafka admin clients manage topics on a raftmeta quorum
(docs/kafka-protocol.md). Encoding by kio (generated from Kafka's JSON schemas); every request
goes through the node's ControllerService path."""
