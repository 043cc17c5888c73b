"""The index files: lookups by key, the on-disk layout, recovery and retention."""

from __future__ import annotations

import random
import re
import struct
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidemq.common import sysflag
from tidemq.common.clock import ManualClock
from tidemq.common.hashing import java_string_hash
from tidemq.store.api import DispatchRequest
from tidemq.store.fs import REAL_FS, CrashPlan, FaultyFileSystem, FileSystem
from tidemq.store.index import IndexService

BASE_MS = 1_700_000_000_000
SLOTS = 64
ENTRIES = 100
EVERYTHING = (0, 2**62)


def request(
    offset: int,
    keys: str = "",
    unique_key: str | None = None,
    *,
    ts: int = BASE_MS,
    topic: str = "T",
    sys_flag: int = 0,
) -> DispatchRequest:
    return DispatchRequest(
        topic, 0, offset, 100, 0, ts, 0, keys=keys, unique_key=unique_key, sys_flag=sys_flag
    )


def open_service(
    directory: Path,
    fs: FileSystem = REAL_FS,
    *,
    slots: int = SLOTS,
    entries: int = ENTRIES,
    clean: bool = True,
    checkpoint: int = 0,
) -> IndexService:
    service = IndexService(
        directory, fs, ManualClock(), max_hash_slots=slots, max_index_count=entries
    )
    service.load(clean, checkpoint)
    return service


def find(service: IndexService, key: str, max_num: int = 1000, topic: str = "T") -> list[int]:
    return service.query(topic, key, max_num, *EVERYTHING)


def raw_hash(text: str) -> int:
    """RocketMQ's keyHash: abs of Java's hashCode, 0 when abs overflows."""
    value = abs(java_string_hash(text))
    return 0 if value >= 2**31 else value


@pytest.fixture
def service(tmp_path: Path) -> Iterator[IndexService]:
    instance = open_service(tmp_path / "index")
    yield instance
    instance.close()


# -- lookups --------------------------------------------------------------


def test_finds_a_message_by_key_and_by_unique_key(service: IndexService) -> None:
    service.build(request(0, "order-1", "UNIQ-A"))
    service.build(request(100, "order-2", "UNIQ-B"))

    assert find(service, "order-1") == [0]
    assert find(service, "UNIQ-B") == [100]
    assert find(service, "missing") == []
    assert find(service, "order-1", topic="Other") == []


def test_every_space_separated_key_is_indexed(service: IndexService) -> None:
    service.build(request(0, " a  b c ", "u"))

    assert [find(service, key) for key in ("a", "b", "c", "u")] == [[0]] * 4
    assert find(service, "") == []


def test_a_key_repeated_in_one_message_gives_one_offset(service: IndexService) -> None:
    service.build(request(0, "same same", "same"))
    service.build(request(100, "same"))

    assert find(service, "same") == [100, 0]


def two_keys_in_one_slot() -> tuple[str, str]:
    """Keys whose hashes differ but share a slot of a 64-slot file."""
    by_slot: dict[int, str] = {}
    for n in range(1000):
        key = f"k{n}"
        slot = raw_hash(f"T#{key}") % SLOTS
        if slot in by_slot:
            return by_slot[slot], key
        by_slot[slot] = key
    raise AssertionError("no two keys share a slot")


def test_keys_sharing_a_slot_keep_separate_answers(service: IndexService) -> None:
    first, second = two_keys_in_one_slot()
    assert raw_hash(f"T#{first}") != raw_hash(f"T#{second}")
    service.build(request(0, first))
    service.build(request(100, second))
    service.build(request(200, first))

    assert find(service, first) == [200, 0]
    assert find(service, second) == [100]


def test_keys_with_equal_java_hash_both_come_back(service: IndexService) -> None:
    assert java_string_hash("Aa") == java_string_hash("BB")
    service.build(request(0, "Aa"))
    service.build(request(100, "BB"))

    assert find(service, "Aa") == [100, 0]
    assert find(service, "BB") == [100, 0]


def test_time_range_is_inclusive_at_second_precision(service: IndexService) -> None:
    for n, delta_ms in enumerate([0, 1700, 2000, 3999]):
        service.build(request(n * 100, "k", ts=BASE_MS + delta_ms))

    # Times are kept as whole seconds after the file's first entry:
    # BASE, BASE+1000, BASE+2000, BASE+3000.
    assert service.query("T", "k", 10, BASE_MS + 1000, BASE_MS + 3000) == [300, 200, 100]
    assert service.query("T", "k", 10, BASE_MS + 1500, BASE_MS + 2500) == [200]
    assert service.query("T", "k", 10, BASE_MS, BASE_MS) == [0]
    assert service.query("T", "k", 10, BASE_MS + 9000, BASE_MS + 9999) == []
    assert service.query("T", "k", 10, BASE_MS + 2000, BASE_MS + 1000) == []


def test_max_num_keeps_the_newest(service: IndexService) -> None:
    for n in range(10):
        service.build(request(n * 100, "k"))

    assert find(service, "k", max_num=3) == [900, 800, 700]
    assert find(service, "k", max_num=0) == []


def test_newest_first_across_rolled_files(tmp_path: Path) -> None:
    service = open_service(tmp_path, slots=4, entries=6)
    for n in range(20):
        service.build(request(n * 100, f"k{n % 2}", f"u{n}", ts=BASE_MS + n * 1000))

    assert len(service.files()) > 3
    assert find(service, "k0") == list(range(1800, -1, -200))
    assert find(service, "k1", max_num=4) == [1900, 1700, 1500, 1300]
    window = service.query("T", "k1", 100, BASE_MS + 5000, BASE_MS + 12000)
    assert window == [1100, 900, 700, 500]
    service.close()


def test_a_message_keys_stay_in_one_file(tmp_path: Path) -> None:
    service = open_service(tmp_path, slots=4, entries=5)  # 4 entries a file
    service.build(request(0, "a b"))
    service.build(request(100, "c d e"))  # does not fit beside a, b

    assert len(service.files()) == 2
    assert service.last_update_phy_offset == 100
    service.close()


def test_rolled_back_messages_are_skipped_prepared_are_indexed(service: IndexService) -> None:
    service.build(request(0, "k", sys_flag=sysflag.TRANSACTION_ROLLBACK_TYPE))
    service.build(request(100, "k", sys_flag=sysflag.TRANSACTION_PREPARED_TYPE))
    service.build(request(200, "k", sys_flag=sysflag.TRANSACTION_COMMIT_TYPE))

    assert find(service, "k") == [200, 100]


def test_last_update_follows_the_newest_file(service: IndexService) -> None:
    assert (service.last_update_timestamp, service.last_update_phy_offset) == (0, 0)
    service.build(request(500, "k", ts=BASE_MS + 42))
    assert (service.last_update_timestamp, service.last_update_phy_offset) == (BASE_MS + 42, 500)


def test_files_are_named_by_time_and_sort_in_creation_order(tmp_path: Path) -> None:
    service = open_service(tmp_path, slots=4, entries=2)  # one entry a file
    for n in range(3):
        service.build(request(n * 100, "k"))

    names = [path.name for path in service.files()]
    assert all(re.fullmatch(r"\d{17}", name) for name in names)
    assert names == sorted(set(names))  # frozen clock: bumped by a millisecond
    service.close()


# -- layout ---------------------------------------------------------------


def test_golden_layout(tmp_path: Path) -> None:
    service = open_service(tmp_path)
    service.build(request(4096, "k", ts=BASE_MS + 7))
    service.build(request(8192, "k", ts=BASE_MS + 2500))
    service.close()

    (path,) = tmp_path.iterdir()
    raw = path.read_bytes()
    assert len(raw) == 40 + 64 * 4 + 100 * 20
    # hashCode("T#k") = 84*31^2 + 35*31 + 107 = 81916; slot 81916 % 64 = 60
    assert raw[:40] == struct.pack(">qqqqii", BASE_MS + 7, BASE_MS + 2500, 4096, 8192, 1, 3)
    assert raw[40 + 60 * 4 : 40 + 61 * 4] == (2).to_bytes(4, "big")
    assert raw[40 : 40 + 60 * 4] == bytes(240)
    entries = 40 + 64 * 4
    assert raw[entries : entries + 20] == bytes(20)  # entry 0 is unused
    first = (81916).to_bytes(4, "big") + (4096).to_bytes(8, "big") + bytes(8)
    assert raw[entries + 20 : entries + 40] == first
    # (BASE+2500 - (BASE+7)) // 1000 = 2 seconds; previous head: entry 1
    second = (81916).to_bytes(4, "big") + (8192).to_bytes(8, "big") + b"\0\0\0\2\0\0\0\1"
    assert raw[entries + 40 : entries + 60] == second
    assert raw[entries + 60 :] == bytes(len(raw) - entries - 60)


def key_hashing_to_min_int(prefix: str) -> str:
    """A key with hashCode(prefix + key) == -2**31, solved digit by digit in base 31."""
    length = 7  # 31**7 > 2**32
    mask = 2**32 - 1
    prefix_hash = java_string_hash(prefix) & mask
    offsets = sum(65 * 31**k for k in range(length))  # characters start at "A"
    value = (2**31 - prefix_hash * 31**length - offsets) & mask
    digits = []
    for _ in range(length):
        value, digit = divmod(value, 31)
        digits.append(chr(65 + digit))
    return "".join(reversed(digits))


def test_a_hash_whose_abs_overflows_is_stored_as_zero(tmp_path: Path) -> None:
    key = key_hashing_to_min_int("T#")
    assert java_string_hash(f"T#{key}") == -(2**31)
    service = open_service(tmp_path)
    service.build(request(300, key))
    assert find(service, key) == [300]
    service.close()

    raw = next(tmp_path.iterdir()).read_bytes()
    assert raw[40:44] == (1).to_bytes(4, "big")  # slot 0
    entry = 40 + 64 * 4 + 20
    assert raw[entry : entry + 12] == bytes(4) + (300).to_bytes(8, "big")


# -- persistence and idempotence -----------------------------------------


def sample_requests(count: int, seed: int = 1) -> list[DispatchRequest]:
    rng = random.Random(seed)
    return [
        request(
            n * 100,
            " ".join(f"k{rng.randrange(12)}" for _ in range(rng.randrange(3))),
            f"u{n}",
            ts=BASE_MS + n * 400,
        )
        for n in range(count)
    ]


ALL_KEYS = [f"k{n}" for n in range(12)] + [f"u{n}" for n in range(80)]


def answers(service: IndexService) -> dict[str, list[int]]:
    return {key: find(service, key) for key in ALL_KEYS}


def test_reopen_after_close_gives_the_same_answers(tmp_path: Path) -> None:
    service = open_service(tmp_path, slots=8, entries=30)
    for item in sample_requests(80):
        service.build(item)
    before = answers(service)
    files = service.files()
    stamps = (service.last_update_timestamp, service.last_update_phy_offset)
    service.close()

    reopened = open_service(tmp_path, slots=8, entries=30)
    assert reopened.files() == files
    assert (reopened.last_update_timestamp, reopened.last_update_phy_offset) == stamps
    assert answers(reopened) == before
    reopened.close()


def test_building_the_same_requests_again_adds_nothing(tmp_path: Path) -> None:
    service = open_service(tmp_path, slots=8, entries=30)
    items = sample_requests(80)
    for item in items:
        service.build(item)
    before = answers(service)
    images = [path.read_bytes() for path in service.files()]

    for item in items:
        service.build(item)

    assert answers(service) == before
    assert [path.read_bytes() for path in service.files()] == images
    assert all(len(offsets) == len(set(offsets)) for offsets in before.values())
    service.close()


# -- recovery -------------------------------------------------------------


def build_files(directory: Path, items: Sequence[DispatchRequest]) -> list[tuple[int, int]]:
    """Index `items` cleanly; returns each file's (beginPhyOffset, endPhyOffset)."""
    service = open_service(directory, slots=8, entries=11)
    for item in items:
        service.build(item)
    ranges = [
        (int.from_bytes(p.read_bytes()[16:24], "big"), int.from_bytes(p.read_bytes()[24:32], "big"))
        for p in service.files()
    ]
    service.close()
    return ranges


def test_load_after_crash_drops_files_past_the_checkpoint(tmp_path: Path) -> None:
    items = [request(n * 100, "a b", f"u{n}") for n in range(12)]  # 3 entries each
    ranges = build_files(tmp_path, items)
    assert ranges == [(0, 200), (300, 500), (600, 800), (900, 1100)]

    service = IndexService(tmp_path, REAL_FS, ManualClock(), max_hash_slots=8, max_index_count=11)
    # The checkpoint is an exclusive end: the message at 500 is not covered.
    assert service.load(False, 500) == 300
    assert len(service.files()) == 1
    assert find(service, "a") == [200, 100, 0]
    assert find(service, "u4") == []
    for item in items[3:]:
        service.build(item)
    assert find(service, "a") == [n * 100 for n in range(11, -1, -1)]
    service.close()


def test_load_after_crash_keeps_files_the_checkpoint_covers(tmp_path: Path) -> None:
    build_files(tmp_path, [request(n * 100, "a b", f"u{n}") for n in range(12)])
    service = IndexService(tmp_path, REAL_FS, ManualClock(), max_hash_slots=8, max_index_count=11)
    assert service.load(False, 1200) is None
    assert len(service.files()) == 4
    service.close()


def test_clean_load_keeps_every_file(tmp_path: Path) -> None:
    build_files(tmp_path, [request(n * 100, "a b", f"u{n}") for n in range(12)])
    service = IndexService(tmp_path, REAL_FS, ManualClock(), max_hash_slots=8, max_index_count=11)
    assert service.load(True, 0) is None
    assert len(service.files()) == 4
    service.close()


@pytest.mark.parametrize(
    ("damage", "expected_rebuild"),
    [
        ("truncate", 200),  # size mismatch: previous file's last offset
        ("count", 200),  # indexCount out of range
        ("begin", 200),  # beginPhyOffset disagrees with the first entry
        ("zero", 200),  # never-synced header
    ],
)
def test_a_file_with_a_bad_header_is_dropped_with_all_newer(
    tmp_path: Path, damage: str, expected_rebuild: int
) -> None:
    ranges = build_files(tmp_path, [request(n * 100, "a b", f"u{n}") for n in range(12)])
    assert len(ranges) == 4
    second = sorted(tmp_path.iterdir())[1]
    raw = bytearray(second.read_bytes())
    if damage == "truncate":
        raw = raw[:-1]
    elif damage == "count":
        raw[36:40] = (1000).to_bytes(4, "big")
    elif damage == "begin":
        raw[16:24] = (301).to_bytes(8, "big")
    else:
        raw[:40] = bytes(40)
    second.write_bytes(bytes(raw))

    service = IndexService(tmp_path, REAL_FS, ManualClock(), max_hash_slots=8, max_index_count=11)
    assert service.load(True, 0) == expected_rebuild
    assert len(service.files()) == 1
    assert len(list(tmp_path.iterdir())) == 1
    service.close()


def model_answer(
    items: Sequence[DispatchRequest], key: str, begin_ms: int = 0, end_ms: int = 2**62
) -> list[int]:
    """Newest-first offsets of messages indexed under a key with `key`'s hash."""
    wanted = raw_hash(f"T#{key}")
    found: list[int] = []
    for item in reversed(items):
        keys = [k for k in item.keys.split(" ") if k] + [item.unique_key or ""]
        hit = any(k and raw_hash(f"T#{k}") == wanted for k in keys)
        if hit and begin_ms <= item.store_timestamp <= end_ms:
            found.append(item.commitlog_offset)
    return found


PLANS = [
    CrashPlan(),
    CrashPlan(keep_probability=0.1, tear_probability=0.8),
    CrashPlan(keep_probability=0.6, tear_probability=0.4, bit_flips=4),
]


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("plan", PLANS, ids=["default", "torn", "flipped"])
def test_crash_keeps_every_key_flushed_before_the_checkpoint(
    tmp_path: Path, seed: int, plan: CrashPlan
) -> None:
    rng = random.Random(seed)
    fs = FaultyFileSystem(seed)
    service = open_service(tmp_path, fs, slots=8, entries=16)
    items = sample_requests(80, seed)
    checkpoint = 0
    for item in items:
        service.build(item)
        if rng.random() < 0.15:
            service.flush()
            checkpoint = item.commitlog_offset + item.size
    fs.crash(plan)

    recovered = IndexService(tmp_path, REAL_FS, ManualClock(), max_hash_slots=8, max_index_count=16)
    rebuild_from = recovered.load(False, checkpoint)
    redispatch_from = checkpoint if rebuild_from is None else rebuild_from
    assert redispatch_from <= checkpoint
    durable = [item for item in items if item.commitlog_offset < redispatch_from]
    for key in ALL_KEYS:
        assert set(model_answer(durable, key)) <= set(find(recovered, key)), key

    for item in items:
        if item.commitlog_offset >= redispatch_from:
            recovered.build(item)
    for key in ALL_KEYS:
        assert find(recovered, key) == model_answer(items, key), key
    recovered.close()


def test_crash_repairs_slots_pointing_at_lost_entries(tmp_path: Path) -> None:
    fs = FaultyFileSystem(0)
    service = open_service(tmp_path, fs)
    service.build(request(0, "k"))
    service.flush()
    service.build(request(100, "k"))
    fs.crash(CrashPlan(keep_probability=0.0, tear_probability=0.0))
    (path,) = tmp_path.iterdir()
    raw = bytearray(path.read_bytes())
    slot = 40 + 60 * 4  # "T#k" hashes to slot 60 (see the golden test)
    raw[slot : slot + 4] = (2).to_bytes(4, "big")  # the slot write survived, the rest did not
    path.write_bytes(bytes(raw))

    recovered = open_service(tmp_path, clean=False, checkpoint=100)
    assert recovered.files() == [path]
    assert find(recovered, "k") == [0]
    recovered.build(request(100, "k"))
    assert find(recovered, "k") == [100, 0]
    recovered.close()


def test_crash_rebuilds_from_the_checkpoint_when_the_last_kept_file_lost_writes(
    tmp_path: Path,
) -> None:
    service = open_service(tmp_path, slots=8, entries=5)  # 4 entries a file
    service.build(request(0, "a"))
    service.build(request(100, "a"))
    first = service.files()[0]
    synced = first.read_bytes()  # the checkpoint covers up to 200
    service.build(request(200, "b"))  # lost from the first file ...
    service.build(request(300, "c d"))  # ... while the second file survived
    service.close()
    first.write_bytes(synced)

    recovered = IndexService(tmp_path, REAL_FS, ManualClock(), max_hash_slots=8, max_index_count=5)
    assert recovered.load(False, 200) == 200
    for item in [request(200, "b"), request(300, "c d")]:
        recovered.build(item)
    assert [find(recovered, key) for key in "abcd"] == [[100, 0], [200], [300], [300]]
    recovered.close()


def test_crash_repairs_an_end_timestamp_from_a_torn_header(tmp_path: Path) -> None:
    service = open_service(tmp_path)
    for n in range(3):
        service.build(request(n * 100, "k", ts=BASE_MS + n * 10_000 + 5))
    service.close()
    (path,) = tmp_path.iterdir()
    raw = bytearray(path.read_bytes())
    # A torn write mixed old and new bytes into endTimestamp.
    raw[8:16] = (BASE_MS + 12_000).to_bytes(8, "big")
    path.write_bytes(bytes(raw))

    recovered = open_service(tmp_path, clean=False, checkpoint=300)
    # The newest entry is 20 whole seconds after the first (BASE+5).
    assert recovered.last_update_timestamp == BASE_MS + 5 + 20_999
    assert recovered.query("T", "k", 10, BASE_MS + 15_000, BASE_MS + 30_000) == [200]
    recovered.close()


# -- retention and truncation ---------------------------------------------


def test_delete_files_before_keeps_the_newest(tmp_path: Path) -> None:
    service = open_service(tmp_path, slots=8, entries=11)
    for n in range(12):
        service.build(request(n * 100, "a b", f"u{n}"))
    files = service.files()  # ends: 200, 500, 800, 1100

    assert service.delete_files_before(500) == files[:1]
    assert service.delete_files_before(501) == files[1:2]
    assert service.delete_files_before(10_000) == files[2:3]
    assert service.files() == files[3:]
    assert [p for p in files if p.exists()] == files[3:]
    assert find(service, "a") == [1100, 1000, 900]
    service.close()


def test_truncate_after_removes_and_trims(tmp_path: Path) -> None:
    service = open_service(tmp_path, slots=8, entries=11)
    for n in range(12):
        service.build(request(n * 100, "a b", f"u{n}", ts=BASE_MS + n * 1000))
    files = service.files()  # begins: 0, 300, 600, 900

    assert service.truncate_after(700) == files[3:]
    assert service.files() == files[:3]
    assert service.last_update_phy_offset == 600
    assert service.last_update_timestamp == BASE_MS + 6000
    assert find(service, "a") == [600, 500, 400, 300, 200, 100, 0]
    assert find(service, "u7") == []

    # The commitlog is written again from 700: new messages are indexed.
    service.build(request(700, "a", "v7"))
    assert find(service, "a")[:2] == [700, 600]
    assert find(service, "v7") == [700]
    service.close()

    reopened = open_service(tmp_path, slots=8, entries=11, clean=False, checkpoint=800)
    assert find(reopened, "a")[:2] == [700, 600]
    reopened.close()


def test_truncate_everything(tmp_path: Path) -> None:
    service = open_service(tmp_path, slots=8, entries=11)
    for n in range(6):  # 5 messages fill the first file
        service.build(request(n * 100, "a b"))
    assert len(service.truncate_after(0)) == 2
    assert service.files() == []
    service.build(request(0, "a"))
    assert find(service, "a") == [0]
    service.close()


def test_flush_syncs_only_written_files(tmp_path: Path) -> None:
    fs = FaultyFileSystem(0)
    service = open_service(tmp_path, fs)
    service.build(request(0, "k"))
    service.flush()
    synced = fs.sync_count
    service.flush()
    assert fs.sync_count == synced
    service.build(request(100, "k"))
    service.flush()
    assert fs.sync_count == synced + 1
    service.close()


# -- model ----------------------------------------------------------------

KEYS = ["Aa", "BB", "x", "y", "order-1", "order-2"]
puts = st.lists(
    st.tuples(
        st.lists(st.sampled_from(KEYS), max_size=3),
        st.integers(1, 300),  # offset step
        st.integers(0, 3),  # seconds step
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=puts,
    key=st.sampled_from(KEYS),
    window=st.tuples(st.integers(-2, 60), st.integers(-2, 60)),
    max_num=st.integers(1, 50),
)
def test_query_matches_a_dict_model(
    steps: list[tuple[list[str], int, int]],
    key: str,
    window: tuple[int, int],
    max_num: int,
) -> None:
    items: list[DispatchRequest] = []
    offset, seconds = 0, 0
    for keys, offset_step, seconds_step in steps:
        items.append(request(offset, " ".join(keys), ts=BASE_MS + seconds * 1000))
        offset += offset_step
        seconds += seconds_step
    begin_ms, end_ms = (BASE_MS + window[0] * 1000, BASE_MS + window[1] * 1000)

    with tempfile.TemporaryDirectory() as directory:
        service = open_service(Path(directory), slots=4, entries=7)
        for item in items:
            service.build(item)
        got = service.query("T", key, max_num, begin_ms, end_ms)
        service.close()

    expected = model_answer(items, key, begin_ms, end_ms)
    assert got == expected[:max_num]
