"""The consumer-protocol payload codec lives in ``protocol.consumer_protocol`` (shared by the
coordinator and every client face); these names stay importable from here only until the
console tool that imports them moves onto the blocking client."""

from ..protocol.consumer_protocol import Assignment as Assignment
from ..protocol.consumer_protocol import PayloadError as PayloadError
from ..protocol.consumer_protocol import Subscription as Subscription
from ..protocol.consumer_protocol import decode_assignment as decode_assignment
from ..protocol.consumer_protocol import decode_subscription as decode_subscription
from ..protocol.consumer_protocol import encode_assignment as encode_assignment
from ..protocol.consumer_protocol import encode_subscription as encode_subscription
