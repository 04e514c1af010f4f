"""Where the pinned Apache Kafka release's jars are, and the ``java`` that runs them.

``make kafka`` copies every runtime jar of the release pinned in ``deploy/kafka/pom.xml`` into
``build/kafka/lib`` of the checkout; ``RAFTMETA_KAFKA_LIB`` points elsewhere (an installed
package has no checkout). A missing release is one clear error, never a silent skip: every check
that needs Kafka fails loudly without it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

KAFKA_LIB_ENV = "RAFTMETA_KAFKA_LIB"
KAFKA_SHELL_LIB_ENV = "RAFTMETA_KAFKA_SHELL_LIB"
# The checkout this package was installed from (editable installs and the test suite).
CHECKOUT = Path(__file__).resolve().parents[2]
DEFAULT_KAFKA_LIB = CHECKOUT / "build" / "kafka" / "lib"
# kafka-metadata-shell's own class path (deploy/kafka/shell/pom.xml: no 4.4.0 build of it exists).
DEFAULT_KAFKA_SHELL_LIB = CHECKOUT / "build" / "kafka" / "shell-lib"
SHELL_MARKER_JAR_PREFIX = "kafka-shell-"
# The jar whose presence says the release was resolved (the broker and controller themselves).
MARKER_JAR_PREFIX = "kafka_2.13-"


class KafkaNotResolved(RuntimeError):
    """Apache Kafka's jars, or a ``java`` to run them, cannot be found."""


def kafka_lib_dir() -> Path:
    """The folder holding the pinned Kafka release's runtime jars, checked to hold them."""
    configured = os.environ.get(KAFKA_LIB_ENV)
    lib = Path(configured) if configured else DEFAULT_KAFKA_LIB
    if not lib.is_dir() or not any(p.name.startswith(MARKER_JAR_PREFIX) for p in lib.glob("*.jar")):
        raise KafkaNotResolved(
            f"Apache Kafka's jars are not in {lib}: run `make kafka` (resolves deploy/kafka/pom.xml "
            f"with Maven) or set {KAFKA_LIB_ENV} to a folder holding them"
        )
    return lib


def kafka_shell_classpath() -> str:
    """The class path of kafka-metadata-shell (``make kafka`` resolves it beside the release)."""
    configured = os.environ.get(KAFKA_SHELL_LIB_ENV)
    lib = Path(configured) if configured else DEFAULT_KAFKA_SHELL_LIB
    if not lib.is_dir() or not any(p.name.startswith(SHELL_MARKER_JAR_PREFIX) for p in lib.glob("*.jar")):
        raise KafkaNotResolved(
            f"kafka-metadata-shell's jars are not in {lib}: run `make kafka` (resolves deploy/kafka/shell/pom.xml "
            f"with Maven) or set {KAFKA_SHELL_LIB_ENV} to a folder holding them"
        )
    return str(lib / "*")


def kafka_version() -> str:
    """The pinned release's version, read off its broker jar's name (``kafka_2.13-4.4.0.jar``)."""
    for jar in sorted(kafka_lib_dir().glob(f"{MARKER_JAR_PREFIX}*.jar")):
        return jar.name.removeprefix(MARKER_JAR_PREFIX).removesuffix(".jar")
    raise KafkaNotResolved("no kafka_2.13 jar")  # unreachable: kafka_lib_dir checked it


def kafka_classpath() -> str:
    """A JVM class path of every jar of the release (the wildcard form ``java -cp`` expands)."""
    return str(kafka_lib_dir() / "*")


def java_executable() -> str:
    """``$JAVA_HOME/bin/java``, else ``java`` on ``PATH``; Kafka 4 needs Java 17 or newer."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise KafkaNotResolved("no `java` on PATH and no JAVA_HOME: Kafka 4 needs Java 17 or newer")
    return found
