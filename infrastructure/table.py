"""`dune-ledger table`: the demo room, created and served with its seat pages."""

from __future__ import annotations

from typing import Any

import uvicorn

from dune_ledger.domain.game import faction_name
from dune_ledger.infrastructure.demo import BOX_LAYOUT, committed
from dune_ledger.infrastructure.http import create_app
from dune_ledger.infrastructure.storage import open_rooms
from dune_ledger.infrastructure.worker import Background


def table_links(base: str, created: dict[str, Any]) -> list[tuple[str, str]]:
    """Who opens which address: one per seat, the spectators' and the host's. A token
    rides in the fragment, which a browser never sends to a server; the page moves it
    into sessionStorage and drops it from the address bar."""
    room = created["room"]
    return [*((faction_name(seat), f"{base}/play/{room}#token={token}")
              for seat, token in created["seats"].items()),
            ("Spectators", f"{base}/watch/{room}#token={created['spectator']}"),
            ("Host", f"{base}/host")]


def serve_table(url: str | None, host: str, port: int) -> int:
    """Create the demo room (committed: RULES 9), print its page addresses, and serve it."""
    with open_rooms(url) as rooms:
        created = rooms.create_room(committed(BOX_LAYOUT))
        shown = f"[{host}]" if ":" in host else host
        base = f"http://{shown}:{port}"
        print(f"The table: room {created['room']}\n")
        for who, address in table_links(base, created):
            print(f"  {who:<14} {address}")
        print("\nOpen one address per player, each in its own tab (the token is kept per tab);")
        print("the host page lists the room, deals it if a seat holds up the ceremony, ends "
              "it and offers its transcript.")
        print("The tokens are shown once, here. Ctrl-C stops the server.\n", flush=True)
        # The worker's duties too (deadlines, autopilot seats), as `serve` does.
        shared = rooms if (url or "").startswith("memory:") else None
        background = Background(url, shared).start()
        try:
            uvicorn.run(create_app(rooms), host=host, port=port)
        finally:
            background.stop()
    return 0
