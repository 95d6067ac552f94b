"""`dune-ledger table`: the demo room, created and served with its seat pages."""

from __future__ import annotations

from typing import Any

import uvicorn

from dune_ledger.infrastructure.demo import BOX_LAYOUT
from dune_ledger.infrastructure.http import create_app
from dune_ledger.infrastructure.storage import open_rooms
from dune_ledger.infrastructure.worker import Background


def table_links(base: str, created: dict[str, Any]) -> list[dict[str, str]]:
    """One page address per seat. The token rides in the fragment, which a browser never
    sends to a server; the page moves it into sessionStorage and drops it from the
    address bar."""
    room = created["room"]
    return [{"seat": seat, "token": token, "page": f"{base}/play/{room}#token={token}"}
            for seat, token in created["seats"].items()]


def serve_table(url: str | None, host: str, port: int) -> int:
    """Create the demo room, print its page addresses and seat tokens, and serve it."""
    with open_rooms(url) as rooms:
        created = rooms.create_room(BOX_LAYOUT)
        shown = f"[{host}]" if ":" in host else host
        base = f"http://{shown}:{port}"
        print(f"The table: room {created['room']}\n")
        for link in table_links(base, created):
            print(f"  {link['seat']:<10} {link['page']}")
        print("\nOpen one address per player (each in its own tab: the token is kept per tab),")
        print(f"or open {base}/play/{created['room']} and paste that seat's token.")
        print("The tokens are shown once, here. Ctrl-C stops the server.\n", flush=True)
        # The worker's duties too (deadlines, autopilot seats), as `serve` does.
        shared = rooms if (url or "").startswith("memory:") else None
        background = Background(url, shared).start()
        try:
            uvicorn.run(create_app(rooms), host=host, port=port)
        finally:
            background.stop()
    return 0
