"""Durable partition logs: segments, indexes, retention, recovery, producer state.

Plain synchronous code with no event loop: the server decides which thread runs it.
"""

from .config import TOPIC_CONFIG_KEYS as TOPIC_CONFIG_KEYS
from .config import LogConfig as LogConfig
from .config import log_config_from as log_config_from
from .dump import dump_segment as dump_segment
from .errors import InvalidConfigError as InvalidConfigError
from .errors import InvalidPartitionsError as InvalidPartitionsError
from .errors import InvalidProducerEpochError as InvalidProducerEpochError
from .errors import InvalidTopicError as InvalidTopicError
from .errors import KafkaStorageError as KafkaStorageError
from .errors import OffsetOutOfRangeError as OffsetOutOfRangeError
from .errors import OutOfOrderSequenceError as OutOfOrderSequenceError
from .errors import StorageError as StorageError
from .errors import TopicAlreadyExistsError as TopicAlreadyExistsError
from .errors import UnknownTopicOrPartitionError as UnknownTopicOrPartitionError
from .file_region import FileRegion as FileRegion
from .log import FetchDataInfo as FetchDataInfo
from .log import Log as Log
from .log import LogAppendInfo as LogAppendInfo
from .manager import LogManager as LogManager
from .producer_ids import ProducerIdManager as ProducerIdManager
from .producer_state import ProducerStateManager as ProducerStateManager
from .topic_metadata import validate_topic_name as validate_topic_name
