FROM python:3.11-slim
WORKDIR /opt/kbroker
COPY pyproject.toml README.md ./
COPY broker ./broker
COPY protocol ./protocol
COPY storage ./storage
COPY coordinators ./coordinators
COPY client ./client
COPY config ./config
RUN pip install --no-cache-dir .
VOLUME /var/lib/kbroker
EXPOSE 9092
ENTRYPOINT ["kbroker", "serve", "/opt/kbroker/config/server.properties"]
CMD ["--override", "listeners=PLAINTEXT://0.0.0.0:9092", \
     "--override", "advertised.listeners=PLAINTEXT://localhost:9092", \
     "--override", "log.dirs=/var/lib/kbroker"]
