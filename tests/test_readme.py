"""The README's quick start runs as written, from a fresh checkout's root: its
examples/ layouts, its ids, every command's exit code."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def quick_start() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quick start", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    return block.group(1)


def test_the_readme_is_short_and_starts_with_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 250
    first = re.search(r"```sh\n(.*?)```", text, re.S)
    assert first is not None
    lines = first.group(1).splitlines()
    assert lines[0].endswith("dune-ledger demo") and lines[1].endswith("scripts/test")
    assert "scripts/test" in (ROOT / ".ci" / "run").read_text()


def test_the_quick_start_runs_as_written(tmp_path: Path):
    # A fresh checkout: the shipped layouts and `.venv/bin/dune-ledger` (this
    # interpreter's, whichever environment runs the suite), no database.
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    script = bin_dir / "dune-ledger"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m dune_ledger "$@"\n')
    script.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", quick_start()],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert "audited 4 rooms" in done.stderr and "0 rooms with problems" in done.stderr
    assert '"event": "e3"' in done.stdout and '"event": "e8"' in done.stdout
    assert '"full_hand_exchange": true' in done.stdout
