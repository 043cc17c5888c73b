"""Sans-IO codecs of the RocketMQ remoting protocol: bytes in, objects out.

Nothing here touches sockets, event loops or threads (a test enforces it), so
the same code serves the asyncio transport, the in-memory test transport and
fuzzing. Every decoder raises only ProtocolError on bad input.
"""

from .codes import (
    LanguageCode,
    RequestCode,
    ResponseCode,
    SerializeType,
    request_code_name,
    response_code_name,
)
from .command import (
    ONEWAY_FLAG,
    RESPONSE_FLAG,
    CommandDecoder,
    RemotingCommand,
    decode_command,
)
from .errors import ProtocolError
from .frame import MAX_FRAME_SIZE, Frame, FrameDecoder, encode_frame
from .headers import HeaderError, decode_header, decode_send_message_header, encode_header

__all__ = [
    "MAX_FRAME_SIZE",
    "ONEWAY_FLAG",
    "RESPONSE_FLAG",
    "CommandDecoder",
    "Frame",
    "FrameDecoder",
    "HeaderError",
    "LanguageCode",
    "ProtocolError",
    "RemotingCommand",
    "RequestCode",
    "ResponseCode",
    "SerializeType",
    "decode_command",
    "decode_header",
    "decode_send_message_header",
    "encode_frame",
    "encode_header",
    "request_code_name",
    "response_code_name",
]
