"""The integration fixtures (a real 3-node quorum and a client) for the metrics tests."""

from tests.integration.conftest import client, quorum

__all__ = ["client", "quorum"]
