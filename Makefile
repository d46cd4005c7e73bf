# The two commands of the README: `make run` and `make test`. Everything else is reachable from them.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# kcat as a client; zookeeper for the cluster tests (tests/system start it themselves); a Docker
# engine, docker-compose and debootstrap for the compose test (tests/docker starts its own dockerd).
# Maven fetches Apache Kafka's jars for tests/interop (make kafka-jars).
APT_PACKAGES := kcat zookeeper docker.io docker-compose debootstrap maven
# Spark, ZooKeeper and Kafka need a Java runtime, and tests/interop compiles Java against Kafka's
# jars: a JDK, installed only when `javac` is missing.
JRE_PACKAGE := openjdk-17-jdk-headless
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run cluster test unit lint bench bytecode system-deps cluster-deps kafka-jars clean clean-data

$(BIN)/python:
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "minikafka needs Python 3.11 or newer"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# setup.py compiles these two modules in place (mypyc, where a C compiler is found): installed
# again when one changes, so no compiled module is older than its source. An editable install of
# a project with compiled modules warns of the checkout's folders on the import path; they are
# what it imports, so that warning is left out.
COMPILED := protocol/record_scan.py minikafka/storage/offset_map.py
PIP_INSTALL := PYTHONWARNINGS="ignore:Editable installation" $(BIN)/python -m pip install --quiet

# The broker alone (make run) ...
$(BIN)/.installed: pyproject.toml setup.py $(COMPILED) | $(BIN)/python
	$(PIP_INSTALL) -e .
	touch $@

# ... and everything the tests and benches use (clients, pyspark).
$(BIN)/.installed-test: pyproject.toml setup.py $(COMPILED) | $(BIN)/python
	$(PIP_INSTALL) -e '.[test,spark]'
	touch $@ $(BIN)/.installed

# Arguments for `minikafka serve`, e.g. make run ARGS="--override listeners=PLAINTEXT://127.0.0.1:19092"
ARGS ?=

run: $(BIN)/.installed
	$(BIN)/minikafka serve --config config/embedded.properties $(ARGS)

# A local ZooKeeper and three brokers (config/broker-1..3.properties); Ctrl-C stops them one at a time.
cluster: $(BIN)/.installed cluster-deps
	$(BIN)/python -m minikafka.tools.local_cluster

# make cluster needs ZooKeeper alone (Debian's package brings the Java runtime it runs on).
cluster-deps:
	@dpkg -s zookeeper >/dev/null 2>&1 || { echo "installing Debian's zookeeper package"; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zookeeper; }

# Debian packages the tests use.
system-deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	command -v javac >/dev/null 2>&1 || missing="$$missing $(JRE_PACKAGE)"; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

# Apache Kafka 3.9 and 4.x (tests/interop/pom.xml), Spark's Kafka connector for the installed
# pyspark (tests/interop/spark-connector) and a ZooKeeper 3.5 (tests/interop/zookeeper-3.5),
# fetched once into ~/.m2 and reused.
kafka-jars: $(BIN)/.installed-test system-deps
	$(BIN)/python -m tests.interop.kafka fetch
	$(BIN)/python -m tests.interop.spark_connector fetch
	$(BIN)/python -m tests.interop.old_zookeeper fetch

# lint-imports: the layer order of pyproject.toml's [tool.importlinter] (DESIGN.md: Layers).
lint: $(BIN)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# Three workers: most of a test's time is spent waiting on brokers, ZooKeeper, JVMs and clients,
# and with the modules compiled once (bytecode, below) and processes that end at once, a full run
# uses about 28 CPU-minutes: three modules at once keep this 2-core machine busy without starving
# the timing-bound tests. --dist loadscope keeps each module (all of tests/spark: tests/conftest.py)
# on one worker, so its module-scoped brokers and clusters are started once; --no-loadscope-reorder
# keeps the slow-first order of tests/conftest.py (xdist would otherwise start the modules with the
# most tests, the quick unit ones, and leave a long module to run alone at the end). The linters
# run beside the tests (half a minute of mypy on a fresh clone, while the first modules wait on
# their JVMs and brokers), their report printed after the tests', and either failing fails the run.
test: $(BIN)/.installed-test system-deps kafka-jars bytecode
	@lint_log=$$(mktemp); \
	$(MAKE) --no-print-directory lint >$$lint_log 2>&1 & lint=$$!; \
	$(BIN)/pytest -q -p no:cacheprovider -n 3 --dist loadscope --no-loadscope-reorder --durations=25 tests; \
	tests=$$?; wait $$lint; linted=$$?; \
	echo "--- make lint ---"; cat $$lint_log; rm -f $$lint_log; \
	[ $$tests -eq 0 ] && [ $$linted -eq 0 ]

# The tests start hundreds of broker and CLI processes, each importing the project's ~300
# modules: compiled once here, none of them compiles them again (where PYTHONDONTWRITEBYTECODE is
# set, Python itself never caches them). It saves about 0.6 s of CPU per process.
bytecode: $(BIN)/.installed-test
	$(BIN)/python -m compileall -q -j 0 minikafka protocol tests bench

unit: $(BIN)/.installed-test
	$(BIN)/pytest -q tests/unit

bench: $(BIN)/.installed-test system-deps kafka-jars bytecode
	$(BIN)/python bench/run.py

# The virtualenv and the modules compiled into the checkout only: data/ holds the topics of
# make run, and goes only when asked (clean-data).
clean:
	rm -rf $(VENV) build
	rm -f protocol/*.so minikafka/storage/*.so
	@if [ -d data ]; then echo "kept data/ (the log dirs of make run); make clean-data deletes it"; fi

clean-data:
	@echo "deleting data/: every topic and record of make run"
	rm -rf data
