"""scripts/bench runs end to end and reports every figure (sizes tiny, no timing checked)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_smoke_run_reports_every_figure() -> None:
    done = subprocess.run(
        [str(ROOT / "scripts" / "bench"), "--smoke"],
        capture_output=True, text=True, timeout=240, cwd=ROOT,
        env={**os.environ, "PYTHON": sys.executable},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    figures = report["figures"]
    storages = ["sqlite"]
    if not any(n.startswith("PostgreSQL skipped") for n in report["notes"]):
        storages.append("postgresql")

    for storage in storages:
        mix = [r for r in figures["commands"] if r["storage"] == storage]
        if storage == "sqlite" or not any("command figures skipped" in n
                                          for n in report["notes"]):
            for signed in (False, True):  # unsigned, and signed by a keyed seat (RULES 9.3)
                assert sorted(r["processes"] for r in mix if r["signed"] == signed) == [1, 4]
        assert all(r["commands_per_s"] > 0 and r["baseline_per_s"] > 0 for r in mix)

        replays = [r for r in figures["replay"] if r["storage"] == storage]
        assert len(replays) == 2
        assert all(r["audit_ok"] and r["events"] >= r["size"] for r in replays)
        assert all(r["parts_report_same"] and r["parts_first_s"] > 0 for r in replays)

        loads = [r for r in figures["load"] if r["storage"] == storage]
        assert len(loads) == 2
        for r in loads:
            assert r["snapshot_hash_matches"] and r["cache_hash_matches"]
            assert r["audit_hash_matches"]

        growth = [r for r in figures["growth"] if r["storage"] == storage]
        assert [r["ratio_to_first"] > 0 for r in growth] == [True] * 3
        assert growth[0]["version"] < growth[1]["version"] < growth[2]["version"]

        integrity = [(r["cost"], r["of"]) for r in figures["integrity"]
                     if r["storage"] == storage and r["ratio"] > 0]
        assert integrity == [(cost, of) for cost in ("signing", "encryption")
                             for of in ("command", "load", "audit")]

        (bidding,) = [r for r in figures["bidding"] if r["storage"] == storage]
        assert bidding["bid_vs_draw"]["ratio"] > 0
        assert bidding["round_vs_search"]["commands_per_round"] > 30

    (memory,) = figures["memory"]
    assert memory["worker_rc"] == 0
    assert memory["worker_peak_rss_mib"] > 0 and memory["bare_rss_mib"] > 0
    assert "| figure | storage |" in done.stderr
    assert "load average" in done.stderr.split("| figure |")[0]  # how loaded the machine was
    for storage in storages:
        assert f"| commands, 4 processes vs 1 | {bench_label(storage)} |" in done.stderr
    if figures["replay"][0]["processes"] > 1:  # the audit in parts, first with its start
        assert "processes, starting them |" in done.stderr


def bench_label(storage: str) -> str:
    from scripts import bench

    return str(bench.LABEL[storage])


def test_contention_bench_runs_both_ways() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "scripts.bench_contention", "--only", "sqlite",
         "--seconds", "0.5", "--rounds", "1"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| SQLite |")]
    assert [row.split("|")[2].strip() for row in rows] == ["pause", "no pause"]
    assert all(int(row.split("|")[3].strip().replace(",", "")) > 0 for row in rows)


def test_projections_bench_runs_its_three_parts(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "scripts.bench_projections", "--rooms", "2",
         "--commands", "5", "--seconds", "1", "--rate", "20",
         "--db", f"sqlite:///{tmp_path / 'p.db'}"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| rebuild both read models |" in done.stdout
    assert "| p50 | p95 | max |" in done.stdout
    assert "| a seat's view (catch-up included) |" in done.stdout


def test_audit_bench_reports_both_figures_on_clean_rooms() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "scripts.bench_audit", "--storage", "sqlite",
         "--events", "400", "--rooms", "6", "--room-events", "20", "--passes", "1"],
        capture_output=True, text=True, timeout=240, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    long, many = json.loads(done.stdout)["figures"]
    assert long["figure"] == "long" and long["events"] >= 400 and long["appends"] > 1
    assert long["audit_events_per_s"] > 0 and long["walk_every_signature_events_per_s"] > 0
    assert many["figure"] == "many" and many["rooms"] == 6 and many["events"] >= 6 * 20


def test_audit_stages_bench_times_every_stage() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "scripts.bench_audit_stages", "--events", "300",
         "--passes", "1"], capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")][1:]
    assert len(rows) == 8 and rows[-1].startswith("| the whole audit (audit_room) |")
    assert all(float(row.split("|")[2]) >= 0 for row in rows)


def test_a_figure_worse_than_the_kept_report_by_more_than_a_tenth_is_flagged() -> None:
    from scripts import bench

    def report(commands: float, signing: float) -> dict[str, object]:
        return {"mode": "quick", "code": {"commit": "x"}, "notes": [],
                "machine": {"cpus": 2, "memory_gib": 24, "python": "3.11"},
                "figures": {
                    "commands": [{"storage": "sqlite", "processes": 1, "commands_per_s": 1.0,
                                  "baseline_per_s": 1.0, "ratio": commands}],
                    "integrity": [{"storage": "sqlite", "cost": "signing", "of": "command",
                                   "ms": 1.0, "baseline_ms": 1.0, "ratio": signing}]}}

    before = report(commands=0.5, signing=1.0)
    # a rate ratio falls (higher is better), a cost ratio rises (lower is better)
    assert bench.regressions(report(0.44, 1.05), before) == [
        "commands, 1 process, SQLite: 1.14 × before"]
    assert bench.regressions(report(0.5, 1.12), before) == [
        "signing cost per command, SQLite: 1.12 × before"]
    assert bench.regressions(report(0.47, 1.09), before) == []
    table = bench.markdown(report(0.44, 1.0), before)
    assert "| **1.14** |" in table and "more than a tenth more than before (1)" in table


def test_the_kept_baselines_are_reports_the_bench_reads() -> None:
    from scripts import bench

    kept = sorted(bench.BASELINES.glob("*.json"))
    assert [p.stem for p in kept] == ["quick"] or [p.stem for p in kept] == ["full", "quick"]
    for path in kept:
        report = json.loads(path.read_text())
        assert report["mode"] == path.stem
        assert bench.table_rows(report) and bench.regressions(report, report) == []


def test_instruction_counts_of_the_mix() -> None:
    import shutil

    import pytest

    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed")
    done = subprocess.run(
        [sys.executable, "-m", "scripts.bench_instructions", "--storage", "sqlite",
         "--pairs", "2"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = [line for line in done.stdout.splitlines() if line.endswith(" M |")]
    assert float(row.split("|")[3].strip().removesuffix(" M")) > 0
