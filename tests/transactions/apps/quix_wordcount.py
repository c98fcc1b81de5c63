"""An exactly-once word count on Quix Streams, run in its own virtualenv by the tests.

Usage: python quix_wordcount.py BOOTSTRAP INPUT OUTPUT STATE_DIR
Each input record's key is a word; each output record is ``word:count`` keyed by the word.
"""

import sys

from quixstreams import Application


def main() -> None:
    bootstrap, source, sink, state_dir = sys.argv[1:5]
    app = Application(broker_address=bootstrap, consumer_group="quix-wordcount",
                      auto_offset_reset="earliest", processing_guarantee="exactly-once",
                      state_dir=state_dir, commit_interval=0.2,
                      # a killed run's open transaction is aborted by the broker in seconds
                      producer_extra_config={"transaction.timeout.ms": 5000},
                      # and its group membership ends in seconds too
                      consumer_extra_config={"session.timeout.ms": 6000,
                                             "heartbeat.interval.ms": 500})
    words = app.topic(source, key_deserializer="string", value_deserializer="bytes")
    counts = app.topic(sink, key_serializer="string", value_serializer="bytes")

    def count(value: bytes, key: str, timestamp: int, headers: object, state) -> bytes:
        n = state.get("n", 0) + 1
        state.set("n", n)
        return f"{key}:{n}".encode()

    sdf = app.dataframe(words)
    sdf = sdf.apply(count, stateful=True, metadata=True)
    sdf.to_topic(counts)
    print("quix-wordcount running", flush=True)
    app.run()


if __name__ == "__main__":
    main()
