"""tidemq via its own Python client (blocking API), against a `tidemq serve` the harness starts.

produce: Producer.send_batch of `batch` messages per request (one round trip per batch, like
  the Redis pipeline); the broker acks after the commitlog append (async flush = page cache,
  flushed every 500 ms; system "tidemq-sync" runs the server with --flush sync = fdatasync
  group commit before the ack).
consume: LitePullConsumer (subscribe, CONSUME_FROM_FIRST_OFFSET, pull_batch_size=32 per queue,
  long polling, auto commit).
latency: Producer.send per message at the fixed rate (its first attempt on the calling
  thread, over the producer's own socket: the client's normal blocking path since
  caller_thread_connections, docs/client.md); PushConsumer with an `async def` listener
  (run on the consumer's loop, no hand-off to a listener thread; docs/client.md "Push
  consumer") stamps delays.
  Options: caller=N sets Producer(caller_thread_connections=N) (caller=0: every send through
  the loop thread, the path before); listener=thread uses a plain-function listener (run in
  the consumer's thread pool) instead; server=before runs the server with
  PYTHONPATH=$TIDEMQ_BEFORE_SRC (the src/ of another checkout, built: a before/after in one
  run; the client is the project's either way, so pair it with caller=0/listener=thread).

This file is the copy kept in the tidemq repository (benchmarks/peers/tidemq_adapter.py);
load it over the harness's own with `bench.py --plugin <tidemq>/benchmarks/peers/tidemq_adapter.py`.

The server is the project checkout's own .venv/bin/tidemq (checkout named by the
TIDEMQ_PROJECT env var or --opt tidemq.project=PATH), on free ports, with a fresh data dir per
repetition. The harness's venv imports the client from <project>/src (setup.sh installs it).
"""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from benchlib import Adapter, RateTimer, delay_of, make_payload, register, stamped


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port, deadline):
    while time.time() < deadline:
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.1)
    return False


_counter = [0]


@register
class Tidemq(Adapter):
    name = "tidemq"
    description = "tidemq Producer.send_batch / LitePullConsumer poll; async flush (500 ms)"
    flush = "async"

    # -- server -----------------------------------------------------------------------------
    def _project(self):
        p = self.opts.get("project") or os.environ.get("TIDEMQ_PROJECT")
        if not p:
            raise RuntimeError("set TIDEMQ_PROJECT or --opt tidemq.project=PATH")
        return p

    def _start_server(self):
        proj = self._project()
        if os.path.join(proj, "src") not in sys.path:
            sys.path.insert(0, os.path.join(proj, "src"))
        self.ns, self.bp = _free_port(), _free_port()
        self.data = tempfile.mkdtemp(prefix="tidemq-bench-")
        cmd = [
            os.path.join(proj, ".venv", "bin", "tidemq"),
            "serve",
            "--data-dir",
            self.data,
            "--namesrv-port",
            str(self.ns),
            "--broker-port",
            str(self.bp),
            "--grpc-port",
            str(_free_port()),
            "--flush",
            self.flush,
        ]
        self.log = open(self.data + ".log", "ab")  # noqa: SIM115 (the server's, while it runs)
        env = dict(os.environ)
        if self.opts.get("server") == "before":  # another source tree, for a before/after
            env["PYTHONPATH"] = os.environ["TIDEMQ_BEFORE_SRC"]
        self.proc = subprocess.Popen(
            cmd,
            cwd=proj,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.time() + 60
        for p in (self.ns, self.bp):
            if not _wait_port(p, deadline):
                raise RuntimeError("tidemq serve did not start")
        self.server_pid = self.proc.pid
        self.namesrv = f"127.0.0.1:{self.ns}"

    def _stop_server(self):
        if getattr(self, "proc", None) and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        if getattr(self, "log", None):
            self.log.close()
        shutil.rmtree(getattr(self, "data", "/nonexistent-tidemq"), ignore_errors=True)

    @property
    def pidfile(self):  # the harness reads the server's CPU through this
        path = "/tmp/peers/tidemq.pid"
        os.makedirs("/tmp/peers", exist_ok=True)
        with open(path, "w") as f:
            f.write(str(getattr(self, "server_pid", 0)))
        return path

    # -- contract ---------------------------------------------------------------------------
    def setup(self):
        self._start_server()
        from tidemq import Producer

        _counter[0] += 1
        self.topic = f"BenchTopic{_counter[0]}"
        self.group = f"BenchGroup{_counter[0]}"
        queues = str(self.opts.get("queues", 8))
        tidemq = os.path.join(self._project(), ".venv", "bin", "tidemq")
        r = subprocess.run(
            [tidemq, "topic", "create", self.topic, "--queues", queues, "--namesrv", self.namesrv],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if r.returncode != 0:
            raise RuntimeError("topic create failed: " + r.stdout + r.stderr)
        self.producer = Producer("BenchProducers", namesrv=self.namesrv)
        self.producer.start()
        time.sleep(0.5)

    def teardown(self):
        with contextlib.suppress(Exception):
            self.producer.shutdown()
        self._stop_server()

    def versions(self):
        import importlib.metadata as md

        try:
            v = md.version("tidemq")
        except Exception:
            v = "src"
        return {"server": f"tidemq serve ({self.flush} flush)", "client": f"tidemq {v}"}

    def produce(self, count, size, batch, deadline):
        from tidemq import make_message

        payload = make_payload(size)
        done = 0
        while done < count and time.monotonic() < deadline:
            n = min(batch, count - done)
            self.producer.send_batch([make_message(self.topic, payload) for _ in range(n)])
            done += n
        return done

    def consume(self, count, batch, deadline):
        from tidemq import ConsumeFromWhere, LitePullConsumer

        got = 0
        c = LitePullConsumer(
            self.group,
            namesrv=self.namesrv,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            pull_batch_size=32,
        )
        c.subscribe(self.topic)
        c.start()
        try:
            while got < count and time.monotonic() < deadline:
                msgs = c.poll(timeout_s=1)
                for m in msgs:
                    _ = m.body
                got += len(msgs)
        finally:
            c.shutdown()
        return got

    def lat_produce(self, n, rate, size, deadline):
        from tidemq import Producer, make_message

        tail, timer, sent = make_payload(size - 8), RateTimer(rate), 0
        options = {}
        if "caller" in self.opts:
            options["caller_thread_connections"] = int(self.opts["caller"])
        p = Producer("BenchLatProducers", namesrv=self.namesrv, **options)
        p.start()
        try:
            while sent < n and time.monotonic() < deadline:
                timer.wait()
                p.send(make_message(self.topic, stamped(tail)))
                sent += 1
        finally:
            p.shutdown()
        return sent

    def lat_consume(self, n, deadline, ready):
        from tidemq import ConsumeStatus, PushConsumer

        samples, lock, done = [], threading.Lock(), threading.Event()

        def listener(messages, context):
            with lock:
                for m in messages:
                    samples.append(delay_of(m.body))
                if len(samples) >= n:
                    done.set()
            return ConsumeStatus.CONSUME_SUCCESS

        async def async_listener(messages, context):
            return listener(messages, context)

        chosen = listener if self.opts.get("listener") == "thread" else async_listener
        c = PushConsumer(self.group + "Lat", namesrv=self.namesrv, listener=chosen)
        c.subscribe(self.topic)
        c.start()
        time.sleep(1.0)  # let the rebalance assign queues before the producer starts
        ready()
        done.wait(max(0.0, deadline - time.monotonic()))
        c.shutdown()
        return samples[:n]


@register
class TidemqSync(Tidemq):
    name = "tidemq-sync"
    description = "tidemq as above, server --flush sync (fdatasync group commit before the ack)"
    flush = "sync"
