"""A whole DescribeTopics answer from its pages: what the gRPC client and the Kafka listener's
Metadata both need, as Kafka's admin client pages DescribeTopicPartitions.

The controller answers at most a page of partitions per call (``max_request_partition_size_limit``,
2000 by default), so that no read holds a node's event loop for a time that grows with the image.
Each page is a read of its own: the whole is not one point in time (nor is Kafka's)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from raftmeta.v1 import controller_pb2

SendPage = Callable[[controller_pb2.DescribeTopicsRequest], Awaitable[controller_pb2.DescribeTopicsResponse]]


async def describe_every_page(
    send: SendPage, request: controller_pb2.DescribeTopicsRequest
) -> controller_pb2.DescribeTopicsResponse:
    """Send ``request`` and then one request per ``next_cursor`` until an answer has none; a topic
    cut between two pages is joined back into one. ``request`` is left as the last page sent."""
    whole = controller_pb2.DescribeTopicsResponse()
    while True:
        page = await send(request)
        if not whole.topics and request.cursor.partition_index == 0 and not page.HasField("next_cursor"):
            return page  # one page is the whole answer: no copy of its topics (a deep copy each)
        topics = list(page.topics)
        if request.cursor.partition_index > 0:  # the page goes on with the topic the last one cut
            cut = whole.topics[-1]
            if not (topics and topics[0].name == cut.name and topics[0].topic_id == cut.topic_id):
                # Deleted (and maybe created again) between the two pages: read it again whole.
                del whole.topics[-1]
                request.cursor.partition_index = 0
                continue
            cut.partitions.extend(topics.pop(0).partitions)
        whole.topics.extend(topics)
        if not page.HasField("next_cursor"):
            return whole
        request.cursor.CopyFrom(page.next_cursor)
