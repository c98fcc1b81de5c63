"""trio-broker: a Kafka-compatible broker on Trio."""
