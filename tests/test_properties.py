"""Property-based tests (hypothesis) of the scenario loader and the size, rate and time parsers.

Whatever they are given, they answer with a value in range or a ValueError /
ScenarioError: never another exception, never a value out of range.
"""

from __future__ import annotations

import math
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sanlab.scenarios.errors import ScenarioError
from sanlab.scenarios.loader import load_scenario, parse_scenario
from sanlab.scenarios.schema import Scenario
from sanlab.scenarios.sizes import (
    BLOCK_SIZE,
    LINK_DELAY,
    RATE_HIGH,
    RATE_LOW,
    format_size,
    parse_duration,
    parse_percent,
    parse_rate,
    parse_size,
)

ANYTHING = st.one_of(
    st.text(max_size=30),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=3),
)
SIZE_TEXT = st.from_regex(r"\A\s?[0-9０-９]{1,22}\s?[kmgtKMGTqx]?(i?b)?\s?\Z")


@given(st.one_of(ANYTHING, SIZE_TEXT))
def test_parse_size_answers_a_positive_size_or_a_value_error(value):
    try:
        n = parse_size(value)
    except ValueError as exc:
        assert "size" in str(exc)
    else:
        assert isinstance(n, int) and n > 0


@given(st.integers(min_value=1, max_value=1 << 50))
def test_format_size_round_trips(n):
    assert parse_size(format_size(n)) == n


@given(st.one_of(ANYTHING, SIZE_TEXT))
def test_a_block_size_is_whole_sectors_within_range(value):
    try:
        n = BLOCK_SIZE.check(value)
    except ValueError:
        return
    assert BLOCK_SIZE.low <= n <= BLOCK_SIZE.high and n % 512 == 0


@given(st.one_of(ANYTHING, st.from_regex(r"\A[0-9.]{1,15}\s?[kmgKMG]?bit\Z")))
def test_a_rate_is_finite_and_within_range(value):
    try:
        bits = parse_rate(value)
    except ValueError:
        return
    assert math.isfinite(bits) and RATE_LOW <= bits <= RATE_HIGH


@given(st.one_of(ANYTHING, st.from_regex(r"\A[0-9.]{1,12}\s?(us|ms|s|m)?\Z")))
def test_a_duration_is_finite_and_never_negative(value):
    try:
        seconds = parse_duration(value)
    except ValueError:
        return
    assert math.isfinite(seconds) and seconds >= 0
    try:
        LINK_DELAY.check(value)
    except ValueError:
        assert seconds > LINK_DELAY.high


@given(st.one_of(ANYTHING, st.from_regex(r"\A[0-9.]{1,8}\s?%\Z")))
def test_a_percentage_is_between_0_and_100(value):
    try:
        pct = parse_percent(value)
    except ValueError:
        return
    assert 0.0 <= pct <= 100.0


SCALARS = st.one_of(st.text(max_size=12), st.integers(-(2**40), 2**40), st.floats(), st.booleans(), st.none())
KEYS = st.sampled_from(
    [
        "hosts",
        "links",
        "targets",
        "workloads",
        "projections",
        "name",
        "role",
        "size",
        "bs",
        "rate",
        "endpoints",
        "fabric",
        "transport",
        "stack",
        "host",
        "memory",
        "iodepth",
        "verify",
        "chap",
    ]
) | st.text(max_size=8)
TREES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=25,
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(KEYS, TREES, max_size=6))
def test_any_parsed_tree_is_a_scenario_or_a_scenario_error(tree):
    try:
        scenario = parse_scenario(tree, "prop.yaml")
    except ScenarioError as exc:
        assert exc.problems and all(str(p).startswith("prop.yaml") for p in exc.problems)
        assert all("\n" not in p.message for p in exc.problems)
    else:
        assert isinstance(scenario, Scenario)


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=5000)
@given(st.binary(max_size=2048) | st.builds(lambda t: yaml.safe_dump(t).encode(), TREES))
def test_any_file_is_a_scenario_or_a_scenario_error(tmp_path: Path, content: bytes):
    path = tmp_path / "fuzz.yaml"
    path.write_bytes(content)
    try:
        load_scenario(path)
    except ScenarioError as exc:
        assert all(str(p).startswith(str(path)) for p in exc.problems)
