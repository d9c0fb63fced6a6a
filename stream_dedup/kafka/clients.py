"""Building kafka-python clients with the connection and security settings, and creating topics.

Every client of the stage (the group consumer, the changelog reader, the
transactional producer, the admin client) connects the same way, so the
SASL and SSL settings are passed through in one place.
"""

import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaAdminClient
from kafka.errors import TopicAlreadyExistsError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KafkaConnection:
    """Where the brokers are and how to authenticate (kafka-python's option names)."""

    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_plain_username: str | None = None
    sasl_plain_password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: str | None = field(default=None, repr=False)
    client_id: str = "stream-dedup"

    def options(self) -> dict[str, Any]:
        """Keyword arguments for any kafka-python client (unset options left to its defaults)."""
        given = {
            "bootstrap_servers": [s.strip() for s in self.bootstrap_servers.split(",") if s.strip()],
            "security_protocol": self.security_protocol,
            "sasl_mechanism": self.sasl_mechanism,
            "sasl_plain_username": self.sasl_plain_username,
            "sasl_plain_password": self.sasl_plain_password,
            "ssl_cafile": self.ssl_cafile,
            "ssl_certfile": self.ssl_certfile,
            "ssl_keyfile": self.ssl_keyfile,
            "ssl_password": self.ssl_password,
            "client_id": self.client_id,
        }
        return {name: value for name, value in given.items() if value is not None}


@dataclass(frozen=True)
class TopicSpec:
    """A topic the stage writes to, created if missing."""

    name: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)


def ensure_topics(connection: KafkaConnection, topics: list[TopicSpec]) -> dict[str, int]:
    """Create the missing topics; return the partition count of every topic asked for."""
    admin = KafkaAdminClient(**connection.options())
    try:
        existing = set(admin.list_topics())
        missing = [t for t in topics if t.name not in existing]
        if missing:
            with contextlib.suppress(TopicAlreadyExistsError):  # another replica created it first
                admin.create_topics(
                    {
                        t.name: {"num_partitions": t.partitions, "replication_factor": -1, "configs": t.configs}
                        for t in missing
                    },
                    wait_for_metadata=True,
                )
            for topic in missing:
                log.info("created topic %s (%d partitions)", topic.name, topic.partitions)
        described = admin.describe_topics([t.name for t in topics])
        return {entry["name"]: len(entry["partitions"]) for entry in described}
    finally:
        admin.close()
