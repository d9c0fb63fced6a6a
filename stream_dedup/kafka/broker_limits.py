"""The brokers' limits on our timeouts: a refusal no new session gets past is a settings error.

A broker refuses a transactional producer whose transaction timeout exceeds
its ``transaction.max.timeout.ms`` (``INVALID_TRANSACTION_TIMEOUT``), and a
group member whose session timeout lies outside its
``group.min.session.timeout.ms`` .. ``group.max.session.timeout.ms``
(``INVALID_SESSION_TIMEOUT``). Kafka's defaults (900 s; 6 s to 1,800 s) are
the ranges the settings allow, but a cluster may set them lower. Either
refusal reaches the stage as a :class:`KafkaError`, which restarts the
session, which is refused again, forever: :func:`raise_if_timeout_refused`
turns them into a :class:`ConfigError` naming our setting and the brokers'
(``stream-dedup run`` exits 2).
"""

from kafka.errors import BrokerResponseError, InvalidSessionTimeoutError, InvalidTransactionTimeoutError, KafkaError

from stream_dedup.errors import ConfigError


def raise_if_timeout_refused(
    error: KafkaError, transaction_timeout_seconds: float, session_timeout_seconds: float
) -> None:
    """Raise the :class:`ConfigError` that ``error`` stands for if it is a broker refusing one of our timeouts."""
    if _is_answer(error, InvalidTransactionTimeoutError):
        raise ConfigError(
            "transaction_timeout_seconds",
            f"the brokers refuse a transaction timeout of {transaction_timeout_seconds:g} s: it is above their "
            "transaction.max.timeout.ms. Set transaction_timeout_seconds to that limit or less, or raise "
            "transaction.max.timeout.ms on the brokers",
        ) from error
    if _is_answer(error, InvalidSessionTimeoutError):
        raise ConfigError(
            "session_timeout_seconds",
            f"the brokers refuse a session timeout of {session_timeout_seconds:g} s: it is outside their "
            "group.min.session.timeout.ms to group.max.session.timeout.ms. Set session_timeout_seconds within "
            "that range, or widen it on the brokers",
        ) from error


def _is_answer(error: KafkaError, answer: type[BrokerResponseError]) -> bool:
    """Whether ``error`` is the broker's ``answer``, raised as its class or wrapped.

    kafka-python 3.0 raises a refused group join as the answer's class, but
    wraps a refused InitProducerId in a plain ``KafkaError`` whose message
    holds the answer's own text ("[Error 50] InvalidTransactionTimeoutError").
    """
    return isinstance(error, answer) or str(answer()) in str(error)
