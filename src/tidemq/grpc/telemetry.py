"""Telemetry: the one long-lived stream per gRPC client, and what rides on it.

A client sends its `Settings` on the stream; the broker answers with the
server-owned values the official clients depend on (see
`settings_reply`), and later pushes orphaned-transaction checks down the
same stream. A producer's session registers in the broker's ProducerManager
under each topic it publishes to (the Java proxy's rule: a gRPC producer's
group is its topic), through `TelemetryConnection`, which turns the
broker's CHECK_TRANSACTION_STATE into a `RecoverOrphanedTransactionCommand`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from tidemq.grpc.convert import delivered_message, duration_of, status
from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.errors import ProtocolError
from tidemq.protocol.headers import CheckTransactionStateRequestHeader, decode_header
from tidemq.record.codec import decode_record

log = logging.getLogger(__name__)

RETRY_BACKOFF_S: tuple[int, ...] = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540)
RETRY_BACKOFF_S += (600, 1200, 1800, 3600, 7200)
"""RocketMQ's consumer retry delays (SPEC §7); the last repeats."""
RECEIVE_BATCH_SIZE = 32
LONG_POLLING_TIMEOUT_S = 20
PRODUCER_MAX_ATTEMPTS = 3

_session_ids = itertools.count(1)


def consumer_backoff(max_attempts: int, language: int) -> pb.RetryPolicy:
    """Python reads only a customized policy, Node only an exponential one
    (protocol-grpc.md §4.3); each gets the one it can use."""
    if language == pb.Language.NODE_JS:
        return pb.RetryPolicy(
            max_attempts=max_attempts,
            exponential_backoff=pb.ExponentialBackoff(
                initial=duration_of(1000), max=duration_of(10_000), multiplier=2.0
            ),
        )
    return pb.RetryPolicy(
        max_attempts=max_attempts,
        customized_backoff=pb.CustomizedBackoff(
            next=[duration_of(s * 1000) for s in RETRY_BACKOFF_S]
        ),
    )


def settings_reply(
    settings: pb.Settings, *, max_body_size: int, fifo: bool, max_attempts: int
) -> pb.Settings:
    """The client's settings echoed with the server-owned fields filled in."""
    reply = pb.Settings()
    reply.CopyFrom(settings)
    reply.metric.CopyFrom(pb.Metric(on=False))
    if settings.HasField("subscription"):
        reply.subscription.fifo = fifo
        reply.subscription.receive_batch_size = RECEIVE_BATCH_SIZE
        reply.subscription.long_polling_timeout.CopyFrom(duration_of(LONG_POLLING_TIMEOUT_S * 1000))
        reply.backoff_policy.CopyFrom(consumer_backoff(max_attempts, settings.user_agent.language))
    else:
        reply.publishing.max_body_size = max_body_size
        reply.publishing.validate_message_type = True
        reply.backoff_policy.CopyFrom(
            pb.RetryPolicy(
                max_attempts=PRODUCER_MAX_ATTEMPTS,
                exponential_backoff=pb.ExponentialBackoff(
                    initial=duration_of(10), max=duration_of(1000), multiplier=2.0
                ),
            )
        )
    return reply


class TelemetrySession:
    """One open Telemetry stream: an outbox the stream handler drains."""

    def __init__(self, client_id: str, peer: str) -> None:
        self.id = next(_session_ids)
        self.client_id = client_id
        self.peer = peer
        self.settings: pb.Settings | None = None
        self.outbox: asyncio.Queue[spb.TelemetryCommand | None] = asyncio.Queue()
        self.closed = False

    def push(self, command: spb.TelemetryCommand) -> None:
        if not self.closed:
            self.outbox.put_nowait(command)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.outbox.put_nowait(None)


class TelemetryConnection:
    """A producer's Telemetry session as the broker's ClientConnection."""

    def __init__(self, session: TelemetrySession) -> None:
        self.session = session

    @property
    def id(self) -> object:
        return ("grpc", self.session.id)

    @property
    def remote(self) -> tuple[str, int]:
        host, _, port = self.session.peer.rpartition(":")
        try:
            return host, int(port)
        except ValueError:
            return self.session.peer, 0

    @property
    def closed(self) -> bool:
        return self.session.closed

    def send(self, command: RemotingCommand) -> Any:
        return self.send_oneway(command)

    def send_oneway(self, command: RemotingCommand) -> None:
        """Only CHECK_TRANSACTION_STATE travels this way; others are dropped."""
        if command.code != RequestCode.CHECK_TRANSACTION_STATE:
            return
        header = decode_header(CheckTransactionStateRequestHeader, command.ext_fields)
        try:
            record, _ = decode_record(command.body)
        except ProtocolError as exc:
            log.warning("cannot check a transaction over gRPC: %s", exc)
            return
        # the proxy passes the broker's transaction id on: the UNIQ_KEY
        # (AbstractTransactionalMessageCheckListener.java:55-56, GrpcClientChannel.java:197)
        transaction_id = header.transaction_id or header.msg_id or record.msg_id
        self.session.push(
            spb.TelemetryCommand(
                status=status(),
                recover_orphaned_transaction_command=spb.RecoverOrphanedTransactionCommand(
                    message=delivered_message(record, record.topic),
                    transaction_id=transaction_id,
                ),
            )
        )

    def close(self) -> None:
        self.session.close()
