"""A lab's checker reads answers as people write them, and says why a wrong one is wrong.

Each expected value is checked in a matrix of equivalent spellings (all
must pass) and of near misses (all must fail, with a reason that names what
was read and never the expected value).
"""

from __future__ import annotations

import re

import pytest
import yaml

from sanlab.scenarios.labs.answers import judge

# (expected, tolerance, unit, spellings that mean it, near misses)
MATRIX = [
    ("0x25", 0.0, None, ["0x25", "0X25", 37, "37", " 37 ", "37.0"], ["0x24", "0x26", 36, "x25", "25"]),
    (4, 0.0, None, [4, "4", "4 segments", "4.0"], [3, 5, "four", "4.5"]),
    (
        410825.4,
        0.05,
        None,
        [410825, "410,825", "410 825", "410_825", "411k", "0.41M", "410825 IOPS", "4.1e5", "410.825k"],
        ["2.86M", "380k", "440k", "lots", "380,000 GB/s", True],
    ),
    (2_860_112.0, 0.05, None, ["2.86M", "2,860,112", "2860k", "2.9M"], ["2.6M", "3.1M", "286k"]),
    (
        12.0,
        0.02,
        "us",
        ["12 µs", "12us", "12 μs", "0.012 ms", "12", "12000 ns"],
        ["12 ms", "3 Gb/s", "9 us"],
    ),
    (
        9155.27,
        0.02,
        "MiB/s",
        ["9.6 GB/s", "76.8 Gb/s", "9155 MiB/s", "9155", "8.94 GiB/s"],
        ["9.6", "9 Gb/s"],
    ),
    (6.95, 0.05, "x", ["6.95", "6.95x", "7", "695 %"], ["8", "6.5", "fast"]),
    ("device", 0.0, None, ["device", "Device", " device "], ["cpu", "link-in", "storage"]),
]
CASES = [(e, t, u, s, True) for e, t, u, ok, _ in MATRIX for s in ok] + [
    (e, t, u, s, False) for e, t, u, _, bad in MATRIX for s in bad
]


def _tokens(text: str) -> set[str]:
    return set(re.split(r"[\s():'\"]+", text.lower()))


def _spellings_of(expected: object) -> set[str]:
    if isinstance(expected, str):
        return {expected.lower()}
    value = float(expected)  # type: ignore[arg-type]
    return {f"{value:g}", f"{value:,.6g}", f"{value:.6g}", str(expected)}


IDS = [f"{c[0]}-{c[3]!r}" for c in CASES]


@pytest.mark.parametrize("expected,tolerance,unit,given,right", CASES, ids=IDS)
def test_spellings_and_near_misses(expected, tolerance, unit, given, right):
    verdict, why = judge(given, expected, tolerance, unit)
    assert verdict is right, why
    if not right:  # a reason, and never the answer
        said = why.replace(repr(str(given).strip()[:40]), "")  # its own text echoed is no leak
        assert why and not _tokens(said) & _spellings_of(expected), why


def test_lab_one_opcode_written_as_its_handout_asks():
    """The handout says to write the opcode as hex; YAML reads an unquoted 0x25 as 37."""
    given = yaml.safe_load("data_in_opcode: 0x25\n")["data_in_opcode"]
    assert given == 37 and judge(given, "0x25", 0.0) == (True, "")


def test_a_wrong_answer_is_echoed_as_written_and_says_what_kind_was_asked():
    """Issue #48: '2855180' came back as 'read 2.85518e+06'; the student's own text is echoed."""
    right, why = judge("2.86M", 410825.4, 0.05)
    assert not right and why == "'2.86M' is not it (a number is asked for, within 5%)"
    right, why = judge("2855180", 410825.4, 0.05)
    assert not right and why.startswith("'2855180' is not it") and "e+06" not in why
    right, why = judge("12 Gb/s", 12.0, 0.02, "us")
    assert not right and "is a rate (Gb/s), but a time in us is asked for" in why


@pytest.mark.parametrize(
    "given", ["initiator CPU", "initiator_cpu", "Initiator-CPU", " initiator  cpu ", "INITIATOR-cpu"]
)
def test_words_are_compared_loosely(given):
    """Case, spaces, underscores and hyphens do not matter: the handout never asked for the
    table's exact spelling."""
    assert judge(given, "initiator-cpu", 0.0) == (True, "")


def test_a_word_the_handout_does_not_list_is_told_so_with_the_list():
    names = ["initiator-cpu", "target-cpu", "link-in", "link-out", "latency"]
    right, why = judge("the network", "link-in", 0.0, words=names)
    assert not right and why == f"'the network' is none of the names the handout lists ({', '.join(names)})"
    right, why = judge("target cpu", "link-in", 0.0, words=names)  # a listed name, not this one
    assert not right and why == "'target cpu' is not it (a word is asked for)"
