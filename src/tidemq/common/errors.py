"""The one exception every sans-IO decoder raises on bad input."""


class ProtocolError(ValueError):
    """Bytes that do not form a valid frame, command, header or record.

    Decoders raise only this (never IndexError, struct.error, UnicodeError or
    json errors), so a transport can close one bad connection and go on. It
    lives in `common` because the stored-record codecs (`tidemq.record`, below
    `protocol`) raise it too.
    """
