"""The deterministic simulator (chaos.sim): seeds pass, injected bugs are caught, replay is exact."""

from __future__ import annotations

import time

import pytest

from chaos.sim import BUGS, SimFailure, run
from chaos.sim.__main__ import DEFAULT_STEPS, main

SEEDS = 200


def test_seeds_keep_every_invariant() -> None:
    _seeds_keep_every_invariant(80)  # the default set's bound (the slow test runs 1000)


@pytest.mark.slow
def test_1000_seeds_keep_every_invariant() -> None:
    _seeds_keep_every_invariant(1000)


def _seeds_keep_every_invariant(seeds: int) -> None:
    t0 = time.perf_counter()
    failovers = writes = appends = 0
    for seed in range(seeds):
        result = run(seed, DEFAULT_STEPS)  # raises SimFailure with the seed on a violation
        assert result.steps == DEFAULT_STEPS, f"seed={seed} ran out of events"
        failovers += result.stats["failover_checks"]
        writes += result.stats["writes"]
        appends += result.stats["appends"]
    assert failovers > 0  # the no-rebalance-on-failover check is not vacuous
    # The runtime's group commit runs here: writes made while an append was in flight shared one.
    assert appends < writes, (appends, writes)
    assert time.perf_counter() - t0 < 240 * seeds / 200


@pytest.mark.parametrize("bug", BUGS)
def test_an_injected_bug_is_caught_with_its_seed(bug: str) -> None:
    for seed in range(SEEDS):
        try:
            run(seed, DEFAULT_STEPS, bug=bug)
        except SimFailure as failure:
            assert f"seed={seed}" in str(failure)
            assert f"--seed {seed}" in str(failure)
            # ...and the seed replays to the same failure.
            with pytest.raises(SimFailure) as again:
                run(seed, DEFAULT_STEPS, bug=bug)
            assert (again.value.step, again.value.invariant) == (failure.step, failure.invariant)
            return
    pytest.fail(f"bug {bug!r} survived {SEEDS} seeds")


def test_the_cli_prints_the_seed_of_a_failure(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--seeds", "3", "--steps", "1500", "--bug", "release-before-commit"]) == 1
    out = capsys.readouterr().out
    assert "SIM FAILURE seed=0 step=" in out and "invariant=response-before-commit" in out
    assert "python -m chaos.sim --seed 0" in out


def test_replaying_a_seed_is_deterministic() -> None:
    a = run(7, DEFAULT_STEPS)
    b = run(7, DEFAULT_STEPS)
    assert a.digest == b.digest and a.stats == b.stats and a.now_ms == b.now_ms
    assert run(8, DEFAULT_STEPS).digest != a.digest
