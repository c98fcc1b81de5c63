"""The client's exceptions: one class per Kafka error code (defined in ``client_core.errors``,
shared with the blocking client), so ``trio_broker.client.errors.UnknownTopicOrPartitionError``
is the very class every face raises."""

from ..client_core.errors import *  # noqa: F403
from ..client_core.errors import __all__ as __all__
