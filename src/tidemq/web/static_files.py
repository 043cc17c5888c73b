"""The dashboard's files: `/` is the page, `/static/...` what it loads.

Served from the package (tidemq/web/static/, shipped in the wheel), so the
page needs nothing from the internet. Content types are set by suffix here,
not guessed from the system's tables (a module script must come as
text/javascript, and `.mjs` is missing from some). Caching: the vendored
libraries (static/vendor/, pinned versions) may be kept a day; the page's
own files are revalidated on each load (no-cache, with the ETag and
Last-Modified aiohttp's FileResponse sends), so an upgraded broker never
serves a stale page.
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

__all__ = ["CONTENT_TYPES", "STATIC_ROOT", "add_routes"]

STATIC_ROOT = Path(__file__).parent / "static"
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".json": "application/json",
    ".map": "application/json",
    ".txt": "text/plain; charset=utf-8",
}
VENDOR_CACHE = "public, max-age=86400"
APP_CACHE = "no-cache"


def _file(path: Path, cache: str) -> web.FileResponse:
    content_type = CONTENT_TYPES.get(path.suffix, "application/octet-stream")
    if path.name == "LICENSE" or path.name.startswith("LICENSE."):
        content_type = CONTENT_TYPES[".txt"]
    return web.FileResponse(
        path,
        headers={
            "Content-Type": content_type,
            "Cache-Control": cache,
            "X-Content-Type-Options": "nosniff",
        },
    )


async def index(request: web.Request) -> web.FileResponse:
    return _file(STATIC_ROOT / "index.html", APP_CACHE)


async def static(request: web.Request) -> web.FileResponse:
    relative = request.match_info["path"]
    root = STATIC_ROOT.resolve()
    path = (root / relative).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        raise web.HTTPNotFound(text=f"no file {relative}")
    cache = VENDOR_CACHE if path.is_relative_to(root / "vendor") else APP_CACHE
    return _file(path, cache)


def add_routes(app: web.Application) -> None:
    app.router.add_get("/", index)
    app.router.add_get("/static/{path:.+}", static)
