"""The Kafka listener of a quorum that runs mutual TLS: a client with a certificate from the
quorum's CA manages topics; one without a certificate, or in plaintext, gets nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from raftmeta.client import RetryPolicy, SyncControllerClient
from raftmeta.local import quorum as local_quorum

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
TIMEOUT_S = 20


def test_mutual_tls_on_the_kafka_listener(tmp_path: Path) -> None:
    quorum = local_quorum.up(tmp_path / "q", nodes=3, brokers=3, racks=3, kafka=True, tls=True)
    try:
        assert quorum.tls is not None and quorum.kafka_bootstrap_servers is not None
        servers = quorum.kafka_bootstrap_servers
        ca, cert, key = (str(quorum.tls[part]) for part in ("ca", "cert", "key"))
        trusted = AdminClient({"bootstrap.servers": servers, "security.protocol": "SSL", "ssl.ca.location": ca,
                               "ssl.certificate.location": cert, "ssl.key.location": key, "log_level": 0})  # fmt: skip
        assert trusted.create_topics([NewTopic("tls-topic", 2, 2)])["tls-topic"].result(timeout=TIMEOUT_S) is None
        with SyncControllerClient(
            quorum.bootstrap_server, tls=quorum.client_tls, retry=RetryPolicy(deadline_s=20)
        ) as grpc_client:
            assert len(grpc_client.describe_topics(["tls-topic"]).topics[0].partitions) == 2

        no_certificate = AdminClient({"bootstrap.servers": servers, "security.protocol": "SSL",
                                      "ssl.ca.location": ca, "log_level": 0})  # fmt: skip
        plaintext = AdminClient({"bootstrap.servers": servers, "log_level": 0})
        for refused in (no_certificate, plaintext):
            with pytest.raises(KafkaException):
                refused.list_topics(timeout=3)
    finally:
        local_quorum.down(quorum)
    for node in quorum.nodes:
        assert "Traceback" not in Path(node.log).read_text()
