"""QueueLockManager: RocketMQ's RebalanceLockManager semantics on a manual clock."""

from __future__ import annotations

import pytest

from tidemq.broker.locks import QueueLockManager
from tidemq.common.clock import ManualClock

Q0 = ("TopicTest", "broker-a", 0)
Q1 = ("TopicTest", "broker-a", 1)
Q2 = ("TopicTest", "broker-a", 2)
OTHER_BROKER = ("TopicTest", "broker-b", 0)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def locks(clock: ManualClock) -> QueueLockManager:
    return QueueLockManager(clock)


def test_free_queues_are_locked_for_the_caller(locks: QueueLockManager) -> None:
    assert locks.lock_batch("G", {Q0, Q1}, "c1") == {Q0, Q1}
    assert locks.is_locked("G", Q0, "c1")
    assert locks.is_locked("G", Q1, "c1")
    assert not locks.is_locked("G", Q2, "c1")
    assert not locks.is_locked("G", Q0, "c2")
    assert locks.holder("G", Q0) == "c1"
    assert locks.locked_queues("G", "c1") == {Q0, Q1}


def test_locks_are_per_group_and_per_broker_name(locks: QueueLockManager) -> None:
    assert locks.lock_batch("G1", {Q0}, "c1") == {Q0}
    assert locks.lock_batch("G2", {Q0}, "c2") == {Q0}
    assert locks.lock_batch("G1", {OTHER_BROKER}, "c2") == {OTHER_BROKER}
    assert not locks.is_locked("G1", Q0, "c2")


def test_a_lock_expires_after_60_seconds(locks: QueueLockManager, clock: ManualClock) -> None:
    locks.lock_batch("G", {Q0}, "c1")
    clock.advance(60)
    assert locks.is_locked("G", Q0, "c1")  # Java: expired only when strictly older
    clock.advance(0.001)
    assert not locks.is_locked("G", Q0, "c1")
    assert locks.holder("G", Q0) is None
    assert locks.locked_queues("G", "c1") == set()


def test_the_expiry_is_configurable(clock: ManualClock) -> None:
    locks = QueueLockManager(clock, expiry_s=5)
    locks.lock_batch("G", {Q0}, "c1")
    clock.advance(5.5)
    assert not locks.is_locked("G", Q0, "c1")
    with pytest.raises(ValueError):
        QueueLockManager(clock, expiry_s=0)


def test_relocking_by_the_holder_renews(locks: QueueLockManager, clock: ManualClock) -> None:
    locks.lock_batch("G", {Q0}, "c1")
    for _ in range(5):  # the orderly consumer renews every 20 s
        clock.advance(20)
        assert locks.lock_batch("G", {Q0}, "c1") == {Q0}
    clock.advance(59)
    assert locks.is_locked("G", Q0, "c1")
    assert locks.lock_batch("G", {Q0}, "c2") == set()


def test_is_locked_does_not_renew(locks: QueueLockManager, clock: ManualClock) -> None:
    locks.lock_batch("G", {Q0}, "c1")
    clock.advance(40)
    assert locks.is_locked("G", Q0, "c1")
    clock.advance(21)
    assert not locks.is_locked("G", Q0, "c1")


def test_contention_between_two_clients(locks: QueueLockManager, clock: ManualClock) -> None:
    assert locks.lock_batch("G", {Q0, Q1}, "c1") == {Q0, Q1}
    # c2 gets only the free queue
    assert locks.lock_batch("G", {Q1, Q2}, "c2") == {Q2}
    assert locks.holder("G", Q1) == "c1"
    assert locks.holder("G", Q2) == "c2"
    # c1 keeps renewing Q0 but lets Q1 lapse: c2 takes Q1 over once it expires
    clock.advance(30)
    locks.lock_batch("G", {Q0}, "c1")
    clock.advance(31)
    assert locks.lock_batch("G", {Q0, Q1}, "c2") == {Q1}
    assert locks.holder("G", Q1) == "c2"
    assert not locks.is_locked("G", Q1, "c1")
    assert locks.lock_batch("G", {Q1}, "c1") == set()


def test_only_the_holder_can_unlock(locks: QueueLockManager) -> None:
    locks.lock_batch("G", {Q0, Q1}, "c1")
    locks.unlock_batch("G", {Q0, Q1}, "c2")
    assert locks.is_locked("G", Q0, "c1")
    assert locks.is_locked("G", Q1, "c1")
    locks.unlock_batch("G", {Q0}, "c1")
    assert not locks.is_locked("G", Q0, "c1")
    assert locks.is_locked("G", Q1, "c1")
    assert locks.lock_batch("G", {Q0}, "c2") == {Q0}
    # unlocking unknown groups and queues is harmless
    locks.unlock_batch("nobody", {Q0}, "c1")
    locks.unlock_batch("G", {Q2}, "c1")


def test_the_holder_may_unlock_an_expired_lock(locks: QueueLockManager, clock: ManualClock) -> None:
    locks.lock_batch("G", {Q0}, "c1")
    clock.advance(120)
    locks.unlock_batch("G", {Q0}, "c1")
    assert locks.holder("G", Q0) is None
    assert locks.lock_batch("G", {Q0}, "c2") == {Q0}


def test_purge_and_drop_group(locks: QueueLockManager, clock: ManualClock) -> None:
    locks.lock_batch("G", {Q0}, "c1")
    clock.advance(30)
    locks.lock_batch("G", {Q1}, "c1")
    clock.advance(31)
    assert locks.purge_expired() == 1
    assert locks.locked_queues("G", "c1") == {Q1}
    locks.drop_group("G")
    assert locks.holder("G", Q1) is None


def test_an_empty_request_locks_nothing(locks: QueueLockManager) -> None:
    assert locks.lock_batch("G", set(), "c1") == set()
    assert locks.locked_queues("G", "c1") == set()
