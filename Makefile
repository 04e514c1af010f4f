# Every target that needs the tools depends on the venv stamp, so `make test` and `make demo`
# work from a fresh clone with nothing run before.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: venv kafka kafka-clients jvm-reader test test-all lint format proto demo clean

# setuptools warns on every editable install of a flat layout ("Editable installation ... folders
# with the same name as your package"): nothing a user can act on, so it is not shown.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	PYTHONWARNINGS="ignore:Editable installation" $(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# Apache Kafka, the reference raftmeta is held against (deploy/kafka/pom.xml pins the release): its
# runtime jars land in build/kafka/lib for the KRaft launcher, Kafka's tools and the AdminClient.
KAFKA_LIB := build/kafka/lib
KAFKA_STAMP := build/kafka/.resolved-stamp
# kafka-metadata-shell has its own class path, build/kafka/shell-lib (deploy/kafka/shell/pom.xml says why).
KAFKA_SHELL_LIB := build/kafka/shell-lib
$(KAFKA_STAMP): deploy/kafka/pom.xml deploy/kafka/shell/pom.xml
	@mkdir -p build/kafka
	@mvn -q -B -f deploy/kafka/pom.xml package -Dkafka.lib.dir=$(CURDIR)/$(KAFKA_LIB) >build/kafka/maven.log 2>&1 \
	  || { echo "make: could not resolve Apache Kafka with Maven (deploy/kafka/pom.xml); see build/kafka/maven.log" >&2; exit 1; }
	@mvn -q -B -f deploy/kafka/shell/pom.xml package -Dkafka.shell.lib.dir=$(CURDIR)/$(KAFKA_SHELL_LIB) >>build/kafka/maven.log 2>&1 \
	  || { echo "make: could not resolve kafka-shell with Maven (deploy/kafka/shell/pom.xml); see build/kafka/maven.log" >&2; exit 1; }
	@touch $(KAFKA_STAMP)

kafka: $(KAFKA_STAMP)

# The Kafka clients the listener is tested with besides the Python ones (tests/kafka/test_client_matrix.py):
# kafkajs, pinned by tests/kafka/js/package-lock.json, and Debian's kcat, installed only where missing
# (CI runs as root on Debian; the package lists are refreshed only if the first attempt fails).
KAFKAJS_STAMP := tests/kafka/js/node_modules/.installed-stamp
$(KAFKAJS_STAMP): tests/kafka/js/package.json tests/kafka/js/package-lock.json
	@mkdir -p build
	@npm ci --prefix tests/kafka/js --no-audit --no-fund >build/kafkajs-npm.log 2>&1 \
	  || { echo "make: could not install kafkajs (npm ci --prefix tests/kafka/js); see build/kafkajs-npm.log" >&2; exit 1; }
	@touch $(KAFKAJS_STAMP)

# The JVM reader of Kafka-format metadata logs (deploy/spark/kafka-log-reader): a Spark data source
# compiled with javac against the jars of the installed PySpark (Spark 4.3.0 is not on Maven Central)
# and the pinned Kafka's; no download. docs/verify.md, "The JVM reader".
READER_JAR := build/kafka-log-reader/raftmeta-kafka-log-reader.jar
READER_SOURCES := $(shell find deploy/spark/kafka-log-reader/src -type f)
$(READER_JAR): $(STAMP) $(KAFKA_STAMP) $(READER_SOURCES)
	@mkdir -p build/kafka-log-reader
	@$(BIN)/python -m raftmeta.jobs.kafka_log_jar $(READER_JAR) >build/kafka-log-reader/javac.log 2>&1 \
	  || { echo "make: could not build the JVM reader (deploy/spark/kafka-log-reader); see build/kafka-log-reader/javac.log" >&2; exit 1; }

jvm-reader: $(READER_JAR)

kafka-clients: $(KAFKAJS_STAMP)
	@command -v kcat >/dev/null 2>&1 || { mkdir -p build; { DEBIAN_FRONTEND=noninteractive apt-get install -y kcat || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y kcat; }; } >build/kcat-apt.log 2>&1; } \
	  || { echo "make: kcat is missing and apt-get install -y kcat failed (needs root on Debian); see build/kcat-apt.log" >&2; exit 1; }

## make test: the default suite (unit, short simulator, integration, spark and chaos runs); `slow` soaks excluded.
## Most of it runs on one worker per core (up to 4, pytest-xdist): much of its time is spent waiting
## on real processes, JVMs and timers. Then two workers run the tests against real Apache Kafka
## (`kraft`, one scope on one worker: tests/conftest.py, so each session-scoped KRaft cluster starts
## once) beside the chaos runs, which mostly wait on their faults. Each phase names its slowest tests.
test: $(STAMP) $(KAFKA_STAMP) $(READER_JAR) kafka-clients
	$(BIN)/python -m pytest -m "not slow and not chaos and not kraft" --numprocesses auto --maxprocesses 4 --dist worksteal --durations 15 $(PYTEST_ARGS)
	$(BIN)/python -m pytest -m "not slow and (kraft or chaos)" --numprocesses 2 --dist loadscope --durations 15 $(PYTEST_ARGS)

## make test-all: everything, including the slow soaks.
test-all: $(STAMP) $(KAFKA_STAMP) $(READER_JAR) kafka-clients
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

## make proto: regenerate raftmeta/v1 from proto/raftmeta/v1/*.proto (commit the result).
proto: $(STAMP)
	$(BIN)/python proto/generate.py

demo: $(STAMP) $(KAFKA_STAMP) $(READER_JAR)
	$(BIN)/raftmeta demo

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
