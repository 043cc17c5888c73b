"""The HTTP server: aiohttp on the running loop, bound to host:port (0: a free port).

Routes are added by whoever builds the application (`tidemq.web.app`); this
module only owns the listening socket's lifetime, so starting and stopping
look like the remoting server's and the gRPC endpoint's.
"""

from __future__ import annotations

import logging

from aiohttp import web

log = logging.getLogger(__name__)


class HttpEndpoint:
    """`await start()` binds host:port (0: any free port), `port`, `await stop()`."""

    def __init__(self, app: web.Application, host: str, port: int) -> None:
        self.app = app
        self.host = host
        self._requested_port = port
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self._requested_port, reuse_address=True)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            # named as a file is, so the start failure says which port it was
            where = f"the HTTP port {self.host}:{self._requested_port}"
            raise OSError(exc.errno, exc.strerror, where) from exc
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        log.info("HTTP endpoint on %s:%d", self.host, self.port)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
