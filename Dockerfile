# A minikafka broker. Settings come from KAFKA_* variables (Kafka images' convention:
# KAFKA_ZOOKEEPER_CONNECT is zookeeper.connect) and, if mounted, /etc/minikafka/server.properties;
# without any it is the embedded broker on 9092 with two log dirs under /var/lib/minikafka.
#   docker build -t minikafka .            (BASE_IMAGE: any Debian-like image with python3 and venv)
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}
# Set only where the package index is reached through a proxy with its own certificate authority.
ARG PIP_CERT=
ENV VIRTUAL_ENV=/opt/minikafka/venv \
    PATH=/opt/minikafka/venv/bin:$PATH \
    KAFKA_LISTENERS=PLAINTEXT://0.0.0.0:9092 \
    KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://127.0.0.1:9092 \
    KAFKA_LOG_DIRS=/var/lib/minikafka/d1,/var/lib/minikafka/d2 \
    KAFKA_METRICS_HOST=0.0.0.0 \
    MINIKAFKA_HEALTHCHECK_SERVER=127.0.0.1:9092
WORKDIR /opt/minikafka
# pyproject.toml, README.md, protocol/, minikafka/ and config/ (.dockerignore keeps the rest out).
COPY . .
RUN python3 -m venv "$VIRTUAL_ENV" \
    && pip install --no-cache-dir ${PIP_CERT:+--cert "$PIP_CERT"} . \
    && useradd --system --home-dir /var/lib/minikafka --shell /usr/sbin/nologin minikafka \
    && mkdir -p /var/lib/minikafka/d1 /var/lib/minikafka/d2 /etc/minikafka \
    && chown -R minikafka /var/lib/minikafka
USER minikafka
# Named volumes mounted on the two dirs start owned by the broker's user.
VOLUME ["/var/lib/minikafka/d1", "/var/lib/minikafka/d2"]
EXPOSE 9092 9404
HEALTHCHECK --interval=5s --timeout=10s --start-period=10s --retries=12 \
    CMD minikafka ping --bootstrap-server "$MINIKAFKA_HEALTHCHECK_SERVER"
# A server.properties mounted at /etc/minikafka/ is read first; KAFKA_* variables win over it.
CMD ["sh", "-c", "if [ -f /etc/minikafka/server.properties ]; then set -- --config /etc/minikafka/server.properties; fi; exec minikafka serve --from-env \"$@\""]
