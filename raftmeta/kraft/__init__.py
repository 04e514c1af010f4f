"""Real Apache Kafka beside raftmeta: the pinned release's jars, and JVM processes run from them.

Nothing here is part of the quorum: these are drivers that start Kafka's own code (KRaft
controllers and brokers, Kafka's tools, the Java AdminClient) so that raftmeta is held against
the real thing. The release is pinned in ``deploy/kafka/pom.xml`` and resolved by ``make kafka``.
"""
