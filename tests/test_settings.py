"""The settings (infrastructure/settings.py): the README's Configuration table is what
the object holds, the environment is read in that one module, and once per process."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dune_ledger.infrastructure import settings
from dune_ledger.infrastructure.errors import UsageError
from dune_ledger.infrastructure.http import create_app
from dune_ledger.infrastructure.settings import Settings, variable
from dune_ledger.infrastructure.storage import open_rooms
from scripts.package import ROOT, modules
from scripts.throwaway import DEFAULT_ADMIN_URL
from tests.support import ADMIN, auth, layout


def readme_defaults() -> dict[str, str]:
    """Each variable of the README's Configuration table, and its default as written."""
    text = (ROOT / "README.md").read_text()
    table = text.split("## Configuration", 1)[1].split("\n\n", 2)[1]
    found = {}
    for row in table.splitlines()[2:]:
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        for name in re.findall(r"`((?:DUNE_LEDGER|APPLICATION)_[A-Z_]+)`", cells[0]):
            found[name] = cells[-1].strip("`")
    return found


def default_as_written(value: Any) -> str:
    """A default of the object, as the README's table writes it."""
    if value is True or value is False:
        return "yes" if value else "no"
    if value == "":
        return "unset"
    if value == ():
        return "none"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def test_the_defaults_are_the_readmes() -> None:
    written = readme_defaults()
    assert written.pop("DUNE_LEDGER_TEST_PG") == DEFAULT_ADMIN_URL  # the tests' own
    # Two defaults the table says in words: the library's own recorder, the command's level.
    assert written.pop("APPLICATION_RECORDER_TOPIC") == "ours"
    assert Settings.model_fields["recorder_topic"].default == ""
    assert written.pop("DUNE_LEDGER_LOG_LEVEL") == "INFO for `serve`/`worker`, else WARNING"
    assert Settings.model_fields["log_level"].default is None
    ours = {variable(name): default_as_written(field.default)
            for name, field in Settings.model_fields.items()
            if name not in ("recorder_topic", "log_level")}
    assert ours == written


def test_the_environment_is_read_in_one_production_module() -> None:
    readers = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute | ast.Name | ast.alias) and \
                    getattr(node, "attr", getattr(node, "id", getattr(node, "name", None))) \
                    in ("environ", "getenv", "environb", "getenvb"):
                readers.append(name)
    assert set(readers) == {"dune_ledger.infrastructure.settings"}


def test_a_setting_given_in_code_is_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUNE_LEDGER_ROOM_CACHE", "3")
    monkeypatch.setenv("DUNE_LEDGER_CORS_ORIGINS", "https://a.example, https://b.example")
    assert (settings.current().room_cache, Settings(room_cache=0).room_cache) == (3, 0)
    assert settings.current().cors_origins == ("https://a.example", "https://b.example")
    with pytest.raises(TypeError, match="settings=Settings"):
        open_rooms("memory://", DUNE_LEDGER_ROOM_CACHE="0")  # not silently the library's


def test_every_setting_with_a_bad_value_is_refused_by_name(
        monkeypatch: pytest.MonkeyPatch) -> None:
    bad = {bool: "maybe", int: "lots", float: "soon"}
    given = {}
    for name, field in Settings.model_fields.items():
        if field.annotation in bad:
            given[variable(name)] = bad[field.annotation]
        elif name in ("log_format", "log_level"):
            given[variable(name)] = "loud"
    for name, value in given.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(UsageError) as refused:
        settings.read()
    said = str(refused.value).split("; ")
    assert sorted(line.split(" ", 1)[0] for line in said) == sorted(given)
    for line in said:
        assert re.fullmatch(r"DUNE_LEDGER_\w+ must be .+, not '\w+': set it so, or unset it "
                            r"for the default", line), line


def test_the_settings_are_read_once_per_process(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    reads = []
    read = settings.read
    monkeypatch.setattr(settings, "read", lambda: reads.append(1) or read())
    with open_rooms(f"sqlite:///{tmp_path / 'once.db'}") as rooms, \
            TestClient(create_app(rooms, admin_token=ADMIN)) as client:
        created = client.post("/rooms", json=layout(), headers=auth(ADMIN)).json()
        room, token = created["room"], created["seats"]["emperor"]
        for _ in range(3):
            assert client.post(f"/rooms/{room}/commands", json={"type": "draw"},
                               headers=auth(token)).status_code in (200, 409)
        assert client.get(f"/play/{room}").status_code == 200
    assert len(reads) == 1
