"""The Kafka stage's worker: the consume-detect-publish loop, its durable state and its shutdown."""
