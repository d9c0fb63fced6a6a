# stream-dedup worker image.
#
#   docker build -t stream-dedup:local .
#   docker run --rm -e STREAM_DEDUP_BOOTSTRAP_SERVERS=broker:9092 -p 127.0.0.1:9400:9400 stream-dedup:local
#
# Two stages: the builder installs the package (not editable) and its dependencies into a
# virtualenv under /opt/stream-dedup; the runtime stage copies only that virtualenv, so no
# pip cache, build backend or source tree ends up in the image. Every dependency (numpy,
# xxhash, crc32c, prometheus-client) ships manylinux wheels for amd64 and arm64: the builder
# needs no compiler.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/stream-dedup
WORKDIR /src
# pyproject.toml names README.md as the long description: the build needs both.
COPY pyproject.toml README.md ./
COPY stream_dedup ./stream_dedup
# A regular install from the local source (a wheel is built and installed, no egg-link);
# kafka-python[crc32c,lz4,snappy,zstd] comes in through the package's own dependencies. The command must
# start before the image is used; pip and setuptools are not needed at run time.
RUN /opt/stream-dedup/bin/pip install --no-cache-dir . \
    && /opt/stream-dedup/bin/stream-dedup --version \
    && /opt/stream-dedup/bin/python -m pip uninstall --yes --quiet pip setuptools

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="stream-dedup" \
      org.opencontainers.image.description="Streaming near-duplicate detector: Kafka pipeline stage" \
      org.opencontainers.image.licenses="Apache-2.0"
# A fixed numeric uid/gid, so Kubernetes' runAsUser/fsGroup and volume ownership agree with
# the image. The snapshot directory is created and owned here: a named volume mounted on it
# starts with this ownership, so the worker can write snapshots without running as root.
RUN groupadd --system --gid 10001 stream-dedup \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/stream-dedup \
       --no-create-home --shell /usr/sbin/nologin stream-dedup \
    && mkdir -p /var/lib/stream-dedup/snapshots \
    && chown -R 10001:10001 /var/lib/stream-dedup
COPY --from=builder /opt/stream-dedup /opt/stream-dedup
# The bytecode was compiled at install time; writing none at run time keeps the image usable
# with a read-only root filesystem.
ENV PATH=/opt/stream-dedup/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    STREAM_DEDUP_METRICS_HOST=0.0.0.0 \
    STREAM_DEDUP_METRICS_PORT=9400 \
    STREAM_DEDUP_SNAPSHOT_DIR=/var/lib/stream-dedup/snapshots
WORKDIR /var/lib/stream-dedup
VOLUME ["/var/lib/stream-dedup/snapshots"]
USER 10001:10001
EXPOSE 9400
# slim has no curl: ask /healthz with the standard library. urlopen raises on any status
# other than 2xx, and on a refused connection, so either makes the check fail.
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('STREAM_DEDUP_METRICS_PORT', '9400') + '/healthz', timeout=4)"]
# The worker is PID 1 and handles SIGTERM itself (finish the open transaction, snapshot,
# leave the group): exec form, no shell in between to swallow the signal.
ENTRYPOINT ["stream-dedup"]
CMD ["run"]
