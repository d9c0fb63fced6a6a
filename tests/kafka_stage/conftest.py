"""Fixtures for tests that need a real Kafka broker (see tests/kafka_stage/broker.py)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient

from .broker import JarBroker, jar_broker, provide_bootstrap_servers
from .stage import Stage, kill_leftover_workers, make_stage


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """The broker's "host:port", shared by the whole session.

    Never skips: if no broker can be had, every test using it errors (see broker.py).
    """
    with provide_bootstrap_servers() as bootstrap:
        yield bootstrap


@pytest.fixture
def topic_factory(kafka_bootstrap: str, request: pytest.FixtureRequest) -> Iterator[Callable[..., str]]:
    """create(partitions=1, configs=None) -> name of a new, uniquely named topic.

    Names start with the test's name (handy in broker logs); the topics are deleted after
    the test.
    """
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap, client_id="tests-topic-factory")
    prefix = re.sub(r"[^a-zA-Z0-9._-]", "-", request.node.name)[:100]
    created: list[str] = []

    def create(partitions: int = 1, configs: dict[str, str] | None = None) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        admin.create_topics(
            {
                name: {
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "configs": configs or {},
                }
            },
            wait_for_metadata=True,  # leaders elected before the test produces
        )
        created.append(name)
        return name

    yield create
    try:
        if created:
            admin.delete_topics(created, raise_errors=False)
    finally:
        admin.close()


@pytest.fixture
def own_broker() -> Iterator[JarBroker]:
    """A broker of the test's own, which it may restart or hang, as the shared one must not be."""
    with jar_broker() as broker:
        yield broker


@pytest.fixture
def stage(kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path) -> Stage:
    """Fresh topics and group for one test of the stage; snapshots under the test's tmp_path."""
    return make_stage(kafka_bootstrap, topic_factory, tmp_path)


@pytest.fixture(autouse=True)
def _no_leftover_workers() -> Iterator[None]:
    yield
    kill_leftover_workers()
