"""One handler per Kafka API (Kafka's ``KafkaApis``), the table of them (``registry``), the
broker state they see (``state``) and the fetch purgatory."""
