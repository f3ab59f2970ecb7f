import pytest

from sanlab.scenarios.sizes import format_size, parse_duration, parse_percent, parse_rate, parse_size


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("512", 512),
        (512, 512),
        ("4k", 4096),
        ("4K", 4096),
        ("64k", 65536),
        ("1m", 1 << 20),
        ("2g", 2 << 30),
        ("4KiB", 4096),
        (" 16k ", 16384),
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["5q", "", "k", "-4k", 0, -1, True, 4.5, None, "4 kb x"])
def test_parse_size_rejects_with_hint(bad):
    with pytest.raises(ValueError, match=r"is not a size \(use 512, 4k, 64k, 1m\)"):
        parse_size(bad)


@pytest.mark.parametrize("n", [512, 4096, 1536, 65536, 1 << 20, 3 << 30])
def test_format_size_round_trips(n):
    assert parse_size(format_size(n)) == n


def test_format_size_is_shortest():
    assert format_size(4096) == "4k" and format_size(1536) == "1536" and format_size(1 << 20) == "1m"


def test_durations_rates_percentages():
    assert parse_duration("2ms") == pytest.approx(0.002)
    assert parse_duration("500us") == pytest.approx(0.0005)
    assert parse_duration(10) == 10.0
    assert parse_rate("10gbit") == 10e9
    assert parse_rate("100mbit") == 100e6
    assert parse_percent("0.5%") == 0.5
    for bad, fn in (("fast", parse_duration), ("10gb", parse_rate), ("120%", parse_percent)):
        with pytest.raises(ValueError):
            fn(bad)
