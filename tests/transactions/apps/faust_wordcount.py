"""A word count on faust-streaming, its table backed by a compacted changelog; run in its own
virtualenv by the tests.

Usage: python faust_wordcount.py BOOTSTRAP INPUT OUTPUT DATA_DIR [GUARANTEE]
Each input record's key is a word; each output record is ``word:count`` keyed by the word. The
table lives in memory, so every start recovers it from the changelog alone.
"""

import sys

import faust


def main() -> None:
    bootstrap, source, sink, data_dir = sys.argv[1:5]
    guarantee = sys.argv[5] if len(sys.argv) > 5 else "at_least_once"
    app = faust.App("faust-wordcount", broker=f"kafka://{bootstrap}", store="memory://",
                    datadir=data_dir, topic_partitions=2, web_enabled=False,
                    consumer_auto_offset_reset="earliest", broker_commit_every=50,
                    broker_commit_interval=0.2,
                    processing_guarantee=guarantee)
    words = app.topic(source, key_type=str, value_type=bytes, value_serializer="raw")
    counts = app.topic(sink, key_type=str, value_type=bytes, value_serializer="raw")
    table = app.Table("word_counts", default=int, partitions=2)

    @app.agent(words)
    async def count(stream: faust.StreamT) -> None:
        async for word, _ in stream.items():
            table[word] += 1
            await counts.send(key=word, value=f"{word}:{table[word]}".encode())

    @app.task
    async def running() -> None:
        print("faust-wordcount running", flush=True)

    faust.Worker(app, loglevel="info").execute_from_commandline()


if __name__ == "__main__":
    main()
