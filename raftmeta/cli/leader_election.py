"""``raftmeta leader-election``, mirroring kafka-leader-election.sh (Kafka's LeaderElectionCommand).

``--election-type preferred|unclean`` and exactly one of ``--topic T --partition P``,
``--all-topic-partitions`` or ``--path-to-json-file F`` (``{"partitions": [{"topic": "t",
"partition": 0}]}``), sent as one ElectLeaders request. The answer is printed as Kafka prints it::

    Successfully completed leader election (PREFERRED) for partitions t-0, t-1
    Valid replica already elected for partitions t-2
    Error completing leader election (PREFERRED) for partition: t-3: org.apache.kafka.common.errors.Eligible...

(the last line ends with the Kafka exception of the partition's error code and the quorum's message),
and a partition that could not be elected makes the command exit 1 with Kafka's ``N replica(s)
could not be elected``. Argument errors carry Kafka's messages but exit 2, this project's usage
exit code (kafka-leader-election.sh exits 1 for everything).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from raftmeta.cli.common import (
    INT32_MAX,
    BoundedInt,
    CheckFailed,
    emit_json,
    output_option,
    request_id_option,
    usage_error,
)
from raftmeta.cli.connect import bootstrap_options, connect
from raftmeta.cli.topics import error_name
from raftmeta.v1 import controller_pb2

ELECTION_TYPES = {
    "preferred": controller_pb2.ELECTION_TYPE_PREFERRED,
    "unclean": controller_pb2.ELECTION_TYPE_UNCLEAN,
}
PARTITION_ID = BoundedInt(0, INT32_MAX)
# LeaderElectionCommand's three ways of naming partitions, in the order its messages list them.
SELECTORS = ("topic", "all-topic-partitions", "path-to-json-file")
JSON_FILE = "--path-to-json-file"
NOT_NEEDED = "ELECTION_NOT_NEEDED"
# Kafka prints a failure as the Java exception's toString: "<class>: <message>".
KAFKA_ERRORS_PACKAGE = "org.apache.kafka.common.errors"
# Error names whose Kafka exception class is not the name in CamelCase + "Exception".
_EXCEPTION_CLASSES = {
    "INVALID_TOPIC_EXCEPTION": "InvalidTopicException",
    "CLUSTER_AUTHORIZATION_FAILED": "ClusterAuthorizationException",
    "TOPIC_AUTHORIZATION_FAILED": "TopicAuthorizationException",
    "REQUEST_TIMED_OUT": "TimeoutException",
}


@dataclass(frozen=True, slots=True)
class Outcome:
    topic: str
    partition: int
    error_code: str
    error_message: str

    @property
    def name(self) -> str:
        """Kafka's TopicPartition.toString."""
        return f"{self.topic}-{self.partition}"

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "error_code": self.error_code,
            "error_message": self.error_message,
        }


def kafka_exception(error_code: str, message: str) -> str:
    """How Kafka's tool shows a partition's error: the exception the Admin client raises for that
    error code, as Java's Throwable.toString prints it."""
    cls = _EXCEPTION_CLASSES.get(error_code)
    if cls is None:
        cls = "".join(part.capitalize() for part in error_code.split("_")) + "Exception"
    return f"{KAFKA_ERRORS_PACKAGE}.{cls}: {message}" if message else f"{KAFKA_ERRORS_PACKAGE}.{cls}"


def validate_selection(
    election_type: str | None, topic: str | None, partition: int | None, all_topic_partitions: bool, json_file: bool
) -> None:
    """LeaderElectionCommandOptions.validate, in its order and with its messages."""
    if election_type is None:
        raise usage_error("Missing required option(s): election-type")
    given = [topic is not None, all_topic_partitions, json_file]
    if sum(given) != 1:
        raise usage_error("One and only one of the following options is required: " + ", ".join(SELECTORS))
    if topic is not None and partition is None:
        raise usage_error("Missing required option(s): partition")
    if topic is None and partition is not None:
        raise usage_error("Option partition is only allowed if topic is used")


def read_election_file(path: Path) -> list[tuple[str, int]]:
    """kafka-leader-election.sh's --path-to-json-file: ``{"partitions": [{"topic": "t", "partition":
    0}, ...]}`` -> the partitions in file order. Kafka's messages for an empty file, a missing
    ``partitions`` field and duplicates; anything malformed is a usage error naming the flag."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise usage_error(f"cannot read {path}: {exc}", JSON_FILE) from exc
    if not text.strip():
        raise usage_error("Replica election data is empty", JSON_FILE)
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise usage_error(f"{path} is not JSON: {exc}", JSON_FILE) from exc
    if document is None:
        raise usage_error("Replica election data is empty", JSON_FILE)
    if not isinstance(document, dict):
        raise usage_error(f'{path}: expected {{"partitions": [{{"topic": "t", "partition": 0}}, ...]}}', JSON_FILE)
    if "partitions" not in document:
        raise usage_error('Replica election data is missing "partitions" field', JSON_FILE)
    items = document["partitions"]
    if not isinstance(items, list):
        raise usage_error(f"{path}: partitions must be a list", JSON_FILE)
    partitions: list[tuple[str, int]] = []
    for index, item in enumerate(items):
        topic = item.get("topic") if isinstance(item, dict) else None
        partition = item.get("partition") if isinstance(item, dict) else None
        # bool is an int to Python, not to Kafka's JSON decoder.
        if not isinstance(topic, str) or not isinstance(partition, int) or isinstance(partition, bool):
            raise usage_error(f"{path}: partitions[{index}] needs a string topic and an integer partition", JSON_FILE)
        if not PARTITION_ID.low <= partition <= PARTITION_ID.high:
            raise usage_error(
                f"{path}: partitions[{index}]: partition {partition} is not in the range "
                f"{PARTITION_ID.low}..{PARTITION_ID.high}",
                JSON_FILE,
            )
        partitions.append((topic, partition))
    duplicates = sorted({tp for tp in partitions if partitions.count(tp) > 1})
    if duplicates:
        # Kafka prints the Java Set of TopicPartitions: [t-0, t-1].
        shown = ", ".join(f"{t}-{p}" for t, p in duplicates)
        raise usage_error(f"Replica election data contains duplicate partitions: [{shown}]", JSON_FILE)
    return partitions


def build_request(
    election_type: str, partitions: list[tuple[str, int]] | None, request_id: str
) -> controller_pb2.ElectLeadersRequest:
    """``partitions`` None = every partition (--all-topic-partitions: the request names none)."""
    request = controller_pb2.ElectLeadersRequest(election_type=ELECTION_TYPES[election_type], request_id=request_id)
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions or []:
        by_topic.setdefault(topic, []).append(partition)
    for topic, ids in by_topic.items():
        request.topic_partitions.add(topic=topic, partitions=ids)
    return request


def outcomes(response: controller_pb2.ElectLeadersResponse, *, all_partitions: bool) -> list[Outcome]:
    """Every partition's result, sorted by topic and partition. For --all-topic-partitions Kafka's
    controller leaves out the partitions that already have the leader asked for
    (ReplicationControlManager.electLeaders), so the tool prints only what it changed or could
    not; the same is done here, whether or not the quorum already did."""
    found = [
        Outcome(topic.topic, p.partition, error_name(p.error_code), p.error_message)
        for topic in response.results
        for p in topic.partitions
    ]
    if all_partitions:
        found = [o for o in found if o.error_code != NOT_NEEDED]
    return sorted(found, key=lambda o: (o.topic, o.partition))


def report_lines(election: str, results: list[Outcome]) -> list[str]:
    """LeaderElectionCommand.electLeaders' output, line by line."""
    succeeded = [o.name for o in results if o.error_code == "NONE"]
    noop = [o.name for o in results if o.error_code == NOT_NEEDED]
    lines: list[str] = []
    if succeeded:
        lines.append(f"Successfully completed leader election ({election}) for partitions {', '.join(succeeded)}")
    if noop:
        lines.append(f"Valid replica already elected for partitions {', '.join(noop)}")
    lines.extend(
        f"Error completing leader election ({election}) for partition: {o.name}: "
        f"{kafka_exception(o.error_code, o.error_message)}"
        for o in results
        if o.error_code not in ("NONE", NOT_NEEDED)
    )
    return lines


@click.command("leader-election")
@bootstrap_options
@click.option(
    "--election-type",
    type=click.Choice(sorted(ELECTION_TYPES), case_sensitive=False),
    default=None,
    help="preferred: move leadership to the first replica where it is live, in sync and not leading; "
    "unclean: elect a live replica where a partition has no leader (data loss is possible). REQUIRED.",
)
@click.option("--topic", default=None, help="Topic of the partition to elect a leader for (with --partition).")
@click.option("--partition", type=PARTITION_ID, default=None, help="Partition id; REQUIRED with --topic.")
@click.option("--all-topic-partitions", is_flag=True, help="Elect on every partition where the election type applies.")
@click.option(
    "--path-to-json-file",
    "json_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help='The partitions to elect for: {"partitions": [{"topic": "foo", "partition": 1}, ...]}.',
)
@request_id_option
@output_option
def leader_election(
    bootstrap_server: str,
    timeout: float,
    election_type: str | None,
    topic: str | None,
    partition: int | None,
    all_topic_partitions: bool,
    json_file: Path | None,
    request_id: str,
    output: str,
) -> None:
    """Elect partition leaders: preferred replicas, or unclean for leaderless partitions
    (kafka-leader-election.sh).

    Exactly one of --topic/--partition, --all-topic-partitions or --path-to-json-file. Exits 1 if any
    partition could not be elected (each failure is printed with its reason).
    """
    validate_selection(election_type, topic, partition, all_topic_partitions, json_file is not None)
    assert election_type is not None  # validate_selection refused a missing one
    election_type = election_type.lower()
    election = election_type.upper()  # Kafka prints the ElectionType enum
    partitions: list[tuple[str, int]] | None
    if json_file is not None:
        partitions = read_election_file(json_file)
    elif topic is not None and partition is not None:
        partitions = [(topic, partition)]
    else:
        partitions = None
    results: list[Outcome] = []
    # An empty list in the file elects nothing (as Kafka's tool, which sends an empty set); the
    # request must not go out empty, because an ElectLeaders naming no partition means all of them.
    if partitions is None or partitions:
        request = build_request(election_type, partitions, request_id)
        with connect(bootstrap_server, timeout) as client:
            response: controller_pb2.ElectLeadersResponse = client.call("ElectLeaders", request, deadline_s=timeout)
        results = outcomes(response, all_partitions=partitions is None)
    failed = [o for o in results if o.error_code not in ("NONE", NOT_NEEDED)]
    if output == "json":
        emit_json(
            {
                "election_type": election,
                "results": [o.to_json() for o in results],
                "succeeded": [o.name for o in results if o.error_code == "NONE"],
                "not_needed": [o.name for o in results if o.error_code == NOT_NEEDED],
                "failed": [o.name for o in failed],
            }
        )
    else:
        for line in report_lines(election, results):
            click.echo(line)
    if failed:
        raise CheckFailed(
            f"{len(failed)} replica(s) could not be elected",
            code="ELECTION_FAILED",
            details={"failed": [o.to_json() for o in failed]},
        )
