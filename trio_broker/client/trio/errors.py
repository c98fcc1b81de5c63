"""The client's exceptions: one class per Kafka error code (defined in ``client.core.errors``,
shared with the blocking client), so ``trio_broker.client.trio.errors.UnknownTopicOrPartitionError``
is the very class every face raises."""

from ..core.errors import *  # noqa: F403
from ..core.errors import __all__ as __all__
