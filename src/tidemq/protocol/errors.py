"""The decoders' exception (defined in `tidemq.common.errors`, below every codec)."""

from tidemq.common.errors import ProtocolError

__all__ = ["ProtocolError"]
