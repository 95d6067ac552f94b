"""Adding an effect is adding its module and its card (issue 34; docs/map.md "Adding an
effect"): in a copy of the repository, the sample effect of `tests/effects/` goes in as
whoever adds one would, and nothing else changes. There it is listed, accepted, shown to
its owner only, replayed, audited and typed in the OpenAPI; and its card, in a catalog of
its own, changes no room made before: every golden corpus replays and audits clean, the
printed game's catalog and the layouts' bounds hold, and seeded rooms append what they
always did."""

from __future__ import annotations

from pathlib import Path

from scripts.house_figures import (
    SAMPLE_CHECK,
    add_sample_card,
    add_sample_module,
    changed_files,
    copied_tree,
    run_tests,
)

OLD_ROOMS = ["tests/test_golden.py", "tests/test_catalog.py", "tests/test_bounds.py",
             "tests/test_fairness.py::"
             "test_seeded_rooms_append_exactly_the_facts_they_did_before_fair_dealing"]
# What an effect adds to the tests besides its own (docs/map.md "Adding an effect"): a
# play of scripts/make_golden.py and a corpus that holds its events, and an example of
# each of its commands in tests/test_bounds.py. Without them these two ask for them.
ASKED_OF_A_NEW_EFFECT = "not (together_they_hold_every_event_type or " \
    "every_command_type_has_an_example)"


def test_an_effect_is_its_module_and_its_card_and_changes_no_old_room(tmp_path: Path):
    env = copied_tree(tmp_path)
    tree = tmp_path / "tree"
    add_sample_card(tree)
    without = run_tests(tree, env, SAMPLE_CHECK)
    assert without.returncode == 1, without.stdout[-2000:]  # the card alone does nothing
    add_sample_module(tree)
    assert changed_files(tree) == ["domain/cards.json", "domain/spice_glass.py"]
    played = run_tests(tree, env, SAMPLE_CHECK, *OLD_ROOMS, "-k", ASKED_OF_A_NEW_EFFECT)
    assert played.returncode == 0, played.stdout[-4000:] + played.stderr[-2000:]
