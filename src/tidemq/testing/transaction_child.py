"""A transactional producer in its own process that stalls inside its local
transaction, for the test that SIGKILLs a producer mid-transaction.

Run as ``python -m tidemq.testing.transaction_child NAMESRV GROUP TOPIC BODY``:
it sends BODY in a transaction; its `execute_local_transaction` prints
``half <unique key>`` on stdout and then waits forever, so the half message
stays unresolved. Checks the broker sends it are answered UNKNOW, leaving
the transaction to another producer of GROUP.

In the test, :class:`TransactionChild` starts it, waits for the ``half``
line (`await started()` returns the key) and kills it.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from typing import IO, Any

from tidemq.client.transaction import LocalTransactionState, TransactionProducer
from tidemq.common.message import Message, MessageExt
from tidemq.testing.waiting import eventually

__all__ = ["TransactionChild"]

HALF = "half"
_READ_POLL_S = 0.05
_EXITED = "\0exited"  # not a key the child prints: it ended (or timed out) without one


class _Stalling:
    """Reports the half, then never finishes the local transaction."""

    def __init__(self) -> None:
        self._forever = threading.Event()

    def execute_local_transaction(self, message: Message, arg: Any) -> LocalTransactionState:
        print(HALF, message.unique_key, flush=True)
        self._forever.wait()
        return LocalTransactionState.UNKNOW

    def check_local_transaction(self, message: MessageExt) -> LocalTransactionState:
        return LocalTransactionState.UNKNOW


def main(argv: list[str]) -> int:
    namesrv, group, topic, body = argv
    with TransactionProducer(group, namesrv, listener=_Stalling()) as producer:
        producer.send_message_in_transaction(Message(topic, body.encode()))
    return 0


class TransactionChild:
    """The child process seen from the test; `close()` kills it if it still runs."""

    def __init__(self, namesrv: str, group: str, topic: str, body: str) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", __name__, namesrv, group, topic, body],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._lines: list[str] = []
        self._reader = threading.Thread(target=self._read, args=(self._process.stdout,))
        self._reader.daemon = True
        self._reader.start()

    def _read(self, stream: IO[str] | None) -> None:
        if stream is not None:
            for line in stream:
                self._lines.append(line.strip())

    async def started(self, timeout_s: float = 60.0) -> str:
        """The unique key of the half message, once the child is inside its transaction."""

        def half_key_or_exit() -> str | None:
            for line in list(self._lines):
                word, _, key = line.partition(" ")
                if word == HALF and key:
                    return key
            return _EXITED if self._process.poll() is not None else None

        try:
            key = await eventually(
                half_key_or_exit, "the half line", timeout=timeout_s, interval=_READ_POLL_S
            )
        except AssertionError:  # the deadline passed: fail with the child's stderr below
            key = _EXITED
        if key != _EXITED:
            return key
        self.close()
        stderr = self._process.stderr.read() if self._process.stderr else ""
        raise AssertionError(f"the transaction child did not start:\n{stderr}")

    def kill(self) -> int:
        """SIGKILL the child and reap it; its exit code (-9)."""
        self._process.kill()
        return self._process.wait(30)

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self._process.kill()
        self._process.wait(30)
        self._reader.join(5)
        for stream in (self._process.stdout, self._process.stderr):
            if stream is not None:
                stream.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
