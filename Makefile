# kbroker: `make run` starts one broker on 127.0.0.1:9092 (data in ./data); `make test` runs the suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := kcat docker-compose zookeeper
PYTEST := $(BIN)/python -m pytest

# `make cluster`: ZooKeeper and three brokers on 127.0.0.1:9092-9094 (data in ./data), Ctrl-C stops them.
# `make kafka`: Apache Kafka itself (one KRaft node, jars from Maven Central) on a free port, Ctrl-C stops it.
.PHONY: cluster run test test-slow test-compat test-reference test-java kafka java node bench apt install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,spark]'
	touch $(STAMP)

install: $(STAMP)

apt:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing apt packages:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	fi

run: $(STAMP)
	$(BIN)/kbroker serve config/server.properties

cluster: $(STAMP) apt
	$(BIN)/python -m kbroker.broker.cluster.launcher

# The suite mostly waits on brokers, clusters and Spark (about 40 % of one core over its run): two workers
# (pytest-xdist) halve its wall time. Each file stays on one worker, its module fixtures (a cluster, a
# broker) with it.
PYTEST_WORKERS ?= 2
test: $(STAMP) apt java node
	$(PYTEST) -q -n $(PYTEST_WORKERS) --dist loadfile -m "not slow and not reference"

test-slow: $(STAMP) apt java node
	$(PYTEST) -q -m "slow and not reference"

# The same scenarios against Apache Kafka and kbroker (tests/reference; Kafka's jars fetched by Maven).
test-reference: $(STAMP) apt java node
	$(PYTEST) -q -m reference tests/reference

# Kafka's own Java client (kafka-clients 4.2, from Maven Central) against kbroker processes (tests/java).
test-java: $(STAMP) apt java
	mvn -q -B -f tests/java/pom.xml test -Dkbroker.python=$(abspath $(BIN))/python -Dkbroker.root=$(CURDIR)

kafka: $(STAMP) java
	$(BIN)/python -m tests.reference.apache_kafka

# Java 17 and Maven, for Apache Kafka beside kbroker: Debian's, unless the machine has its own.
java:
	@command -v java >/dev/null && command -v mvn >/dev/null || $(MAKE) apt APT_PACKAGES="openjdk-17-jdk-headless maven"

# Node.js, for kafkajs (tests/kafkajs.py): Debian's, unless the machine has its own.
node:
	@command -v node >/dev/null || $(MAKE) apt APT_PACKAGES="nodejs"

test-compat: $(STAMP) apt java
	$(BIN)/python -m tests.compat.kafka_python_suite
	$(BIN)/python -m tests.compat.librdkafka_suite all
	$(BIN)/python -m tests.compat.franz_go_suite

BENCH_STAMP := $(VENV)/.installed-bench-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install -q -e '.[test,spark,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(MAKE) apt APT_PACKAGES="kcat docker-compose librdkafka-dev gcc zookeeper"
	$(BIN)/python -m bench.run $(if $(SUITE),--suite $(SUITE))

clean:
	rm -rf $(VENV) data build *.egg-info .pytest_cache
