"""System flag bits: `MessageSysFlag` (the SYSFLAG field of a stored message)
and `PullSysFlag` (the sysFlag of a PULL_MESSAGE request).

Values from apache/rocketmq `common/.../sysflag/MessageSysFlag.java` and
`PullSysFlag.java`.

Message SYSFLAG bits::

    bit 0      COMPRESSED           body is compressed (type in bits 8-10)
    bit 1      MULTI_TAGS
    bits 2-3   transaction type     0 none, 4 PREPARED, 8 COMMIT, 12 ROLLBACK
    bit 4      BORNHOST_V6          born host field is 16+4 bytes, not 4+4
    bit 5      STOREHOST_V6         store host field is 16+4 bytes, not 4+4
    bit 6      NEED_UNWRAP          batch marker
    bit 7      INNER_BATCH
    bits 8-10  compression type     0x100 LZ4, 0x200 ZSTD, 0x300 ZLIB
                                    (0 with bit 0 set = ZLIB, older clients)
"""

from __future__ import annotations

# -- MessageSysFlag -----------------------------------------------------------
COMPRESSED = 0x1
MULTI_TAGS = 0x1 << 1
TRANSACTION_NOT_TYPE = 0
TRANSACTION_PREPARED_TYPE = 0x1 << 2
TRANSACTION_COMMIT_TYPE = 0x2 << 2
TRANSACTION_ROLLBACK_TYPE = 0x3 << 2
TRANSACTION_MASK = TRANSACTION_ROLLBACK_TYPE
BORNHOST_V6 = 0x1 << 4
STOREHOST_V6 = 0x1 << 5
NEED_UNWRAP = 0x1 << 6
INNER_BATCH = 0x1 << 7

COMPRESSION_LZ4_TYPE = 0x1 << 8
COMPRESSION_ZSTD_TYPE = 0x2 << 8
COMPRESSION_ZLIB_TYPE = 0x3 << 8
COMPRESSION_TYPE_MASK = 0x7 << 8

# Short aliases matching the names used in the design notes.
TRANSACTION_PREPARED = TRANSACTION_PREPARED_TYPE
TRANSACTION_COMMIT = TRANSACTION_COMMIT_TYPE
TRANSACTION_ROLLBACK = TRANSACTION_ROLLBACK_TYPE

COMPRESSION_NONE = 0
COMPRESSION_LZ4 = 1
COMPRESSION_ZSTD = 2
COMPRESSION_ZLIB = 3


def transaction_value(flag: int) -> int:
    """The transaction type bits (one of the TRANSACTION_*_TYPE values)."""
    return flag & TRANSACTION_MASK


def reset_transaction_value(flag: int, transaction_type: int) -> int:
    """`flag` with its transaction type replaced by `transaction_type`."""
    return (flag & ~TRANSACTION_MASK) | transaction_type


def is_compressed(flag: int) -> bool:
    return flag & COMPRESSED != 0


def clear_compressed(flag: int) -> int:
    return flag & ~COMPRESSED


def compression_type(flag: int) -> int:
    """COMPRESSION_NONE when bit 0 is clear, else the codec in bits 8-10.

    A compressed flag with type bits 0 means ZLIB (clients before the type
    bits existed), as Java's `CompressionType.findByValue(0)` does.
    """
    if not flag & COMPRESSED:
        return COMPRESSION_NONE
    kind = (flag & COMPRESSION_TYPE_MASK) >> 8
    return COMPRESSION_ZLIB if kind == 0 else kind


def has(flag: int, bits: int) -> bool:
    """Java's `MessageSysFlag.check`: any of `bits` set."""
    return flag & bits != 0


# -- PullSysFlag --------------------------------------------------------------
PULL_COMMIT_OFFSET = 0x1
PULL_SUSPEND = 0x1 << 1
PULL_SUBSCRIPTION = 0x1 << 2
PULL_CLASS_FILTER = 0x1 << 3
PULL_LITE_PULL = 0x1 << 4


def build_pull_sys_flag(
    *,
    commit_offset: bool = False,
    suspend: bool = False,
    subscription: bool = False,
    class_filter: bool = False,
    lite_pull: bool = False,
) -> int:
    flag = 0
    if commit_offset:
        flag |= PULL_COMMIT_OFFSET
    if suspend:
        flag |= PULL_SUSPEND
    if subscription:
        flag |= PULL_SUBSCRIPTION
    if class_filter:
        flag |= PULL_CLASS_FILTER
    if lite_pull:
        flag |= PULL_LITE_PULL
    return flag


def pull_has_commit_offset(flag: int) -> bool:
    return flag & PULL_COMMIT_OFFSET != 0


def pull_has_suspend(flag: int) -> bool:
    return flag & PULL_SUSPEND != 0


def pull_has_subscription(flag: int) -> bool:
    return flag & PULL_SUBSCRIPTION != 0


def pull_has_class_filter(flag: int) -> bool:
    return flag & PULL_CLASS_FILTER != 0


def pull_has_lite_pull(flag: int) -> bool:
    return flag & PULL_LITE_PULL != 0


def pull_clear_commit_offset(flag: int) -> int:
    """The broker clears this bit when it has no offset to commit (slave reads)."""
    return flag & ~PULL_COMMIT_OFFSET


def pull_clear_suspend(flag: int) -> int:
    return flag & ~PULL_SUSPEND
