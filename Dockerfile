# The embedded broker in a container: `docker build -t minikafka . && docker run -p 9092:9092 minikafka`
FROM python:3.11-slim
WORKDIR /opt/minikafka
COPY pyproject.toml README.md ./
COPY protocol ./protocol
COPY minikafka ./minikafka
COPY config ./config
RUN pip install --no-cache-dir .
VOLUME ["/var/lib/minikafka"]
EXPOSE 9092 9404
# Listen on every interface inside the container; clients reach it through the published port.
CMD ["minikafka", "serve", "--config", "config/embedded.properties", \
     "--override", "listeners=PLAINTEXT://0.0.0.0:9092", \
     "--override", "advertised.listeners=PLAINTEXT://127.0.0.1:9092", \
     "--override", "log.dirs=/var/lib/minikafka/d1,/var/lib/minikafka/d2", \
     "--override", "metrics.host=0.0.0.0"]
