"""The message schemas, one module of text per API family (format: ``protocol.schema``).

Data written from Kafka's public protocol spec, not code: each module holds the text of its
family's messages, read by ``protocol.schema``. It imports nothing, and as a data table it is
exempt from the structure check's code-lines limit.
"""
