"""Record timestamps for tests on the suite's long-lived brokers.

A broker deletes a partition's segments, the active one included, once their newest record is
older than ``retention.ms`` (7 days by default), at each retention check (every 5 minutes), as
Kafka does. Records stamped with a fixed date years ago can vanish in the middle of a test on a
broker that lives through the whole suite, so tests that want known timestamps count them from
the start of the previous hour instead.
"""

import time
from datetime import UTC, datetime

BASE_MS = (int(time.time()) // 3600 - 1) * 3_600_000


def iso(ms: int) -> str:
    """``ms`` as an ISO-8601 UTC date, as a user would type it on the command line."""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()
