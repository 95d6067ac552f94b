"""The seat page (INTERFACE "The seat page"): `GET /play/{room}` and its static files.

The page is the same HTML for every visitor: it carries the room id from its
own URL and nothing else. Everything a seat sees arrives later, in the
browser, from that seat's view (`GET /rooms/{room}/view` and the stream) with
the token the player pasted, so the page can show no more than the view
does. It draws its controls from the view's `actions` and decides no rule.

The token lives in the browser's sessionStorage. It reaches the server in an
`Authorization` header, and in `?token=` only for the stream, because
EventSource cannot send headers; the HTTP layer keeps that query out of the
access log.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from fastapi.templating import Jinja2Templates

from dune_ledger.domain.game import PAGE_WORDS
from dune_ledger.infrastructure.demo import EXAMPLES, committed
from dune_ledger.infrastructure.settings import current

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=HERE / "templates")
WORDS_JSON = json.dumps(PAGE_WORDS)  # the game's names (domain/words.py) for every page

# The only files /static/page/ serves: no directory is exposed.
STATIC = {"common.js": "text/javascript", "page.js": "text/javascript",
          "fairness.js": "text/javascript",
          "host.js": "text/javascript", "page.css": "text/css", "icon.svg": "image/svg+xml"}


def examples() -> dict[str, Any]:
    """The layouts the host page offers to start from: the demo's, by name."""
    found: dict[str, Any] = {}
    for item in sorted(EXAMPLES.iterdir(), key=lambda item: item.name):
        if not item.name.endswith(".json"):
            continue
        try:
            found[item.name.removesuffix(".json")] = json.loads(item.read_text())
        except (OSError, ValueError):
            continue  # an example that does not read is not offered
    return found


def frame_ancestors() -> str:
    """Who may embed the page in a frame: the page's own origin and the API's CORS origins."""
    return " ".join(["'self'", *current().cors_origins])


def security_headers() -> dict[str, str]:
    # No inline script or style, nothing from another origin: what the page runs is
    # what this package ships.
    policy = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
              f"img-src 'self'; base-uri 'none'; form-action 'none'; "
              f"frame-ancestors {frame_ancestors()}")
    return {
        "Content-Security-Policy": policy,
        "Referrer-Policy": "no-referrer",
        "X-Content-Type-Options": "nosniff",
        "Cache-Control": "no-store",
    }


router = APIRouter()


# The seat page and the spectator page are one template: the spectator's is the
# public view (no `me`, no actions), read with the room's spectator token.
PAGES = {
    "play": {"title": "Dune table", "ask": "Take your seat", "token_label": "Seat token",
             "open": "Open my seat", "leave": "Leave this seat", "seats_title": "The other seats"},
    "watch": {"title": "Watching a Dune table", "ask": "Watch this table",
              "token_label": "Spectator token", "open": "Watch", "leave": "Stop watching",
              "seats_title": "The seats"},
}


def page(request: Request, template: str, context: dict[str, Any]) -> Response:
    response = templates.TemplateResponse(request, template, context)
    response.headers.update(security_headers())
    return response


# Pages, not part of the API: the OpenAPI document describes the JSON routes they use.
@router.get("/play/{room}", response_class=HTMLResponse, include_in_schema=False)
async def play(room: str, request: Request) -> Response:
    return page(request, "play.html", {"room": room, "mode": "play", "words": WORDS_JSON,
                                       **PAGES["play"]})


@router.get("/watch/{room}", response_class=HTMLResponse, include_in_schema=False)
async def watch(room: str, request: Request) -> Response:
    return page(request, "play.html", {"room": room, "mode": "watch", "words": WORDS_JSON,
                                       **PAGES["watch"]})


# The host page: the operator's desk over the operator routes (GET/POST /rooms, token
# reissue). It holds no room data: the browser asks for it with the operator token.
@router.get("/host", response_class=HTMLResponse, include_in_schema=False)
async def host(request: Request) -> Response:
    return page(request, "host.html", {"words": WORDS_JSON,
                                       "examples": list(examples())})


@router.get("/host/examples/{name}", include_in_schema=False)
async def example(name: str) -> Response:
    layouts = examples()
    if name not in layouts:
        return JSONResponse({"ok": False, "version": 0, "error": {
            "code": "not_found", "message": f"no example layout {name!r}"}}, status_code=404)
    # Without its seed: a room made from an example is committed, so it can be verified.
    return JSONResponse(committed(layouts[name]), headers={"Cache-Control": "no-cache"})


@router.api_route("/static/page/{name}", methods=["GET", "HEAD"], include_in_schema=False)
async def static(name: str) -> Response:
    media = STATIC.get(name)
    if media is None:
        return Response(status_code=404)
    return FileResponse(HERE / "static" / name, media_type=media,
                        headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"})
