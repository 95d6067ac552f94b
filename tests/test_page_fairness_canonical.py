"""What the seat page signs is what the server checks (RULES 9.3): the page's canonical
JSON (infrastructure/static/fairness.js) is byte for byte Python's
`json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=True)`, on commands
holding any text a player may type, run in Node (the same JavaScript engine family
as the browser's)."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

FAIRNESS_JS = Path(__file__).parent.parent / "infrastructure" / "static" / "fairness.js"
RUN = """global.window = {};
require(process.argv[1]);
const values = JSON.parse(require('fs').readFileSync(0, 'utf8'));
process.stdout.write(JSON.stringify(values.map(window.duneFairness.canonical)));"""


def text(rng: random.Random) -> str:
    # ASCII, controls, DEL, Latin, the line separators, astral characters (surrogate pairs).
    pools = [(0x20, 0x7E), (0x00, 0x1F), (0x7F, 0x7F), (0xA0, 0x17F), (0x2028, 0x2029),
             (0x1F300, 0x1F64F), (0x4E00, 0x4E80)]
    chars = []
    for _ in range(rng.randint(0, 24)):
        low, high = rng.choice(pools)
        chars.append(chr(rng.randint(low, high)))
    return "".join(chars)


def test_the_pages_canonical_json_is_the_servers() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    rng = random.Random(33)
    commands = [{"type": "ask_truthtrance", "card": "truthtrance-1", "target": "emperor",
                 "question": text(rng), "command_id": "page-" + text(rng),
                 "promise": rng.choice([None, {"spice": rng.randint(0, 40)}]),
                 text(rng): [rng.randint(-5, 5), True, None, text(rng)]}
                for _ in range(300)]
    commands.append({"type": "draw", "question": "é ü 😀 \x7f \x01 \n \" \\ / \u2028"})
    ran = subprocess.run([node, "-e", RUN, str(FAIRNESS_JS)], input=json.dumps(commands),
                         capture_output=True, text=True, timeout=60, check=True)
    written = json.loads(ran.stdout)
    expected = [json.dumps(c, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
                for c in commands]
    mismatched = [(e, w) for e, w in zip(expected, written, strict=True) if e != w]
    assert mismatched == [], mismatched[:3]
