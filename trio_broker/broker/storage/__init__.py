"""Durable partition logs: segments, indexes, retention, compaction, recovery, producer state.

Plain synchronous code with no event loop: the server decides which thread runs it. What it
owns: ``manager`` (``LogManager``: every partition, log dirs, topic ids), ``log`` (``Log``: one
partition), ``segment`` and ``index`` (``LogSegment``, ``OffsetIndex``, ``TimeIndex``),
``loader`` (recovery), ``retention``, ``cleaner`` and ``cleaner_manager`` (compaction),
``producer_state`` and ``producer_ids`` (idempotence, transactions' open ranges, with
``txn_index``), ``config`` (``LogConfig``) and the files they write. See docs/storage.md.

May import ``broker.config`` (topic keys and their validation) and the protocol (the batch
layout, CRCs, compression); nothing above it.
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
