"""The message schemas, one module of text per API family (format: ``protocol.schema``)."""
