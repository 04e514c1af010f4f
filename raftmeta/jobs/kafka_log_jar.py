"""The JVM reader of Kafka-format metadata logs (deploy/spark/kafka-log-reader): where its jar
is, the jars Spark needs beside it, and how it is built.

The reader is a Spark data source (``format("raftmeta-kafka-log")``) written in Java that
decodes with the pinned Kafka release's own classes. It is compiled with ``javac`` against the
jars of the very PySpark this package runs (``pyspark/jars``) and the Kafka release ``make
kafka`` resolved: Spark 4.3.0, the version PySpark ships, is not on Maven Central, and the jars it
would resolve are already installed with PySpark (docs/verify.md, "The JVM reader"). ``make
jvm-reader`` builds it (``make test`` and ``make demo`` do first); ``RAFTMETA_KAFKA_LOG_READER_JAR``
points elsewhere. A missing jar is one clear error, never a silent fallback.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from raftmeta.kraft.classpath import CHECKOUT, KafkaNotResolved, kafka_lib_dir

READER_JAR_ENV = "RAFTMETA_KAFKA_LOG_READER_JAR"
SOURCES = CHECKOUT / "deploy" / "spark" / "kafka-log-reader" / "src" / "main"
DEFAULT_READER_JAR = CHECKOUT / "build" / "kafka-log-reader" / "raftmeta-kafka-log-reader.jar"
SHORT_NAME = "raftmeta-kafka-log"
# The Kafka jars the reader's classes use (record batches and control records, the metadata
# record serde, its base class); every other jar they need ships with Spark.
KAFKA_JARS = ("kafka-clients", "kafka-metadata", "kafka-server-common")


class ReaderNotBuilt(RuntimeError):
    """The JVM reader's jar, or what builds it, cannot be found."""


def reader_jar() -> Path:
    """The built reader jar, checked to exist."""
    configured = os.environ.get(READER_JAR_ENV)
    jar = Path(configured) if configured else DEFAULT_READER_JAR
    if not jar.is_file():
        raise ReaderNotBuilt(
            f"the JVM reader of Kafka-format logs is not built ({jar} is missing): run `make jvm-reader` "
            f"or set {READER_JAR_ENV} to its jar"
        )
    return jar


def reader_built() -> bool:
    try:
        reader_jars()
    except (ReaderNotBuilt, KafkaNotResolved):
        return False
    return True


def kafka_jars() -> list[Path]:
    """The pinned release's jars the reader runs with (one each, by artifact name)."""
    lib = kafka_lib_dir()
    jars = []
    for artifact in KAFKA_JARS:
        found = sorted(lib.glob(f"{artifact}-[0-9]*.jar"))
        if not found:
            raise KafkaNotResolved(f"{lib} holds no {artifact} jar: run `make kafka`")
        jars.append(found[-1])
    return jars


def reader_jars() -> list[Path]:
    """``spark.jars`` for the reader: its jar and the Kafka jars it decodes with."""
    return [reader_jar(), *kafka_jars()]


def pyspark_jars_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def _tool(name: str) -> str:
    """A JDK tool (javac, jar) beside the ``java`` that runs Spark, else on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / name).is_file():
        return str(Path(java_home) / "bin" / name)
    found = shutil.which(name)
    if found is None:
        raise ReaderNotBuilt(f"no `{name}` on PATH and no JAVA_HOME: building the JVM reader needs a JDK 17+")
    return found


def build_reader_jar(jar: Path = DEFAULT_READER_JAR) -> Path:
    """Compile the reader against PySpark's and Kafka's jars and pack it (with its
    META-INF/services entry, which registers the short name) into ``jar``."""
    sources = sorted(str(p) for p in (SOURCES / "java").rglob("*.java"))
    if not sources:
        raise ReaderNotBuilt(f"no Java sources under {SOURCES / 'java'} (an installed package has no checkout)")
    classpath = os.pathsep.join([str(pyspark_jars_dir() / "*"), *(str(p) for p in kafka_jars())])
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=jar.parent) as work:
        classes = Path(work) / "classes"
        compile_ = [_tool("javac"), "--release", "17", "-Xlint:all,-path", "-Werror", "-d", str(classes)]
        subprocess.run([*compile_, "-cp", classpath, *sources], check=True)
        shutil.copytree(SOURCES / "resources", classes, dirs_exist_ok=True)
        staged = Path(work) / jar.name
        subprocess.run([_tool("jar"), "--create", "--file", str(staged), "-C", str(classes), "."], check=True)
        staged.replace(jar)  # a failed build never leaves a half-written jar behind
    return jar


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_READER_JAR
    try:
        print(build_reader_jar(target))
    except (ReaderNotBuilt, KafkaNotResolved, subprocess.CalledProcessError) as exc:
        print(f"could not build the JVM reader: {exc}", file=sys.stderr)
        sys.exit(1)
