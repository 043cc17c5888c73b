"""An orderly push consumer in its own process, for the crash test of
test_push_orderly.py (which SIGKILLs it mid-stream).

Usage: python orderly_consumer_proc.py NAMESRV GROUP TOPIC OUT_FILE DELAY_S

Every batch the listener sees is appended to OUT_FILE as "queue offset body"
lines and flushed before the listener returns, so the file holds at least
everything whose offset this process may have committed. "ready" is printed
on stdout once the consumer runs.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from pathlib import Path

from tidemq.client._core.rebalance import ConsumeFromWhere
from tidemq.client.consumer.listener import ConsumeOrderlyContext, ConsumeOrderlyStatus
from tidemq.client.consumer.push import AsyncPushConsumer
from tidemq.common.message import MessageExt


async def main(namesrv: str, group: str, topic: str, out_file: Path, delay_s: float) -> None:
    lock = threading.Lock()
    with out_file.open("a", encoding="utf-8") as out:

        def listener(
            messages: list[MessageExt], context: ConsumeOrderlyContext
        ) -> ConsumeOrderlyStatus:
            lines = "".join(
                f"{context.mq.queue_id} {m.queue_offset} {m.body.decode()}\n" for m in messages
            )
            with lock:
                out.write(lines)
                out.flush()
            time.sleep(delay_s)
            return ConsumeOrderlyStatus.SUCCESS

        consumer = AsyncPushConsumer(
            group,
            namesrv,
            listener=listener,
            orderly=True,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            rebalance_interval_s=1.0,
            persist_interval_s=1.0,
            instance_name="crashing",
        )
        consumer.subscribe(topic, "*")
        await consumer.start()
        print("ready", flush=True)
        await asyncio.Event().wait()  # until killed


if __name__ == "__main__":
    namesrv_arg, group_arg, topic_arg, out_arg, delay_arg = sys.argv[1:6]
    asyncio.run(main(namesrv_arg, group_arg, topic_arg, Path(out_arg), float(delay_arg)))
