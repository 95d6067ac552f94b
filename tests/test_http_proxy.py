"""The nginx configuration in docs/operations.md: it never logs `?token=` and it keeps
the event stream unbuffered (INTERFACE: the token never appears in a log line)."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "operations.md"
# nginx variables that hold the query string (and so an EventSource's ?token=).
QUERY_VARIABLES = {"$request", "$request_uri", "$args", "$query_string"}


def nginx_config() -> str:
    text = DOC.read_text()
    blocks = re.findall(r"```nginx\n(.*?)```", text, re.S)
    assert len(blocks) == 1, "docs/operations.md shows one nginx configuration"
    return blocks[0]


def statements(config: str) -> list[str]:
    """The configuration's statements, comments dropped, each on one line."""
    code = "\n".join(line.split("#", 1)[0] for line in config.splitlines())
    return [" ".join(s.split()) for s in re.split(r"[;{}]", code) if s.strip()]


def test_the_nginx_access_log_has_a_format_without_the_query() -> None:
    found = statements(nginx_config())
    formats = {}
    for s in found:
        if s.startswith("log_format "):
            name, _, rest = s.removeprefix("log_format ").partition(" ")
            formats[name] = rest
    logs = [s.split()[1:] for s in found if s.startswith("access_log ")]
    assert logs, "an access_log names its format (nginx's default `combined` logs $request)"
    for log in logs:
        assert log[0] == "off" or (len(log) >= 2 and log[1] in formats), log
    for name, fmt in formats.items():
        used = re.findall(r"\$\w+", fmt)
        assert not [v for v in used if v in QUERY_VARIABLES or v.startswith("$arg_")], \
            (name, used)
        assert "$uri" in used  # the path is still logged, without its query


def test_the_stream_location_stays_unbuffered_and_quiet_in_the_error_log() -> None:
    config = nginx_config()
    stream = re.search(r"location ~ \^/rooms/\[\^/\]\+/stream\$ \{(.*?)\}", config, re.S)
    assert stream is not None
    body = statements(stream.group(1))
    for wanted in ("proxy_buffering off", "proxy_cache off", "proxy_read_timeout 1h",
                   "proxy_http_version 1.1"):
        assert wanted in body, wanted
    assert any(s.startswith("error_log ") and s.endswith(" crit") for s in body)
    # The pattern matches the stream route and only it.
    pattern = re.compile(r"^/rooms/[^/]+/stream$")
    assert pattern.match("/rooms/0b6f7c1e-1f7a-4bd1-9d4e-6f1d2c3b4a59/stream")
    assert not pattern.match("/rooms/r/commands")
