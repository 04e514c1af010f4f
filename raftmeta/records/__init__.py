"""The one record codec, pure: the batch format (``codec``: framing, CRC32C, the batch -> record
bytes loop; docs/log-format.md), the one walk over a file's batches (``walk``: each batch with its
CRC verdict, each piece of damage by byte position, offset and reason, recovery's intact-batch
check), the decoding of record bytes into ``MetadataRecord`` messages (``decode``), and
partition records built and read in protobuf's wire format without protobuf's per-field Python
(``wire``: the encoder of creates and snapshots, replay's fast path). Every writer and reader
uses it: the consensus core, the node, the storage, the simulator, ``log dump``, the chaos tape
and the Spark jobs' reader. ``kafka`` is Kafka's own ``__cluster_metadata`` format (record
batches v2, ApiMessageAndVersion metadata records, KRaft control records), read and written byte
for byte: what ``raftmeta log dump`` reads in a real KRaft quorum's log directories. No IO.
"""
