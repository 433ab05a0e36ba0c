"""benchkit.plot writes valid PNGs with the data drawn where it belongs.

The PNG is decoded here independently of the writer: chunks parsed by hand, CRCs
checked, IDAT inflated, scanline filters undone (only filter 0 is expected).
"""

import struct
import zlib

import numpy as np
import pytest

from benchkit.plot import bar_plot, line_plot, write_png

# The first two series colours (benchkit.plot's palette order is part of its
# look; the test finds each series by its colour).
from benchkit.plot import _PALETTE  # noqa: E402

FIRST, SECOND = np.array(_PALETTE[0]), np.array(_PALETTE[1])


def decode_png(path):
    """Return (width, height, pixels uint8 (H, W, 3)) of an 8-bit RGB, filter-0 PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, []
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF, kind
        chunks.append((kind, body))
        pos += 12 + length
    kinds = [k for k, _ in chunks]
    assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND" and b"IDAT" in kinds
    width, height, depth, color_type, compression, filtering, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    assert (depth, color_type, compression, filtering, interlace) == (8, 2, 0, 0, 0)
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(height, 1 + 3 * width)
    assert (rows[:, 0] == 0).all()
    return width, height, rows[:, 1:].reshape(height, width, 3)


def colour_mask(pixels, colour):
    return (pixels == colour).all(axis=2)


def marker_centres(mask):
    """Centres (row, col) of markers, left to right.

    A marker holds a solid 5x5 block of its colour; the 2-pixel-wide line never
    does, at any slope. Core pixels are grouped into markers by gaps between columns.
    """
    windows = np.lib.stride_tricks.sliding_window_view(mask, (5, 5))
    rows, cols = np.nonzero(windows.all(axis=(2, 3)))
    order = np.argsort(cols, kind="stable")
    rows, cols = rows[order], cols[order]
    starts = np.nonzero(np.diff(cols) > 1)[0] + 1
    return np.array([(r.mean() + 2, c.mean() + 2) for r, c in zip(np.split(rows, starts), np.split(cols, starts))])


def test_write_png_round_trips_random_image(tmp_path):
    rng = np.random.default_rng()
    image = rng.integers(0, 256, size=(int(rng.integers(1, 40)), int(rng.integers(1, 40)), 3), dtype=np.uint8)
    width, height, pixels = decode_png(write_png(tmp_path / "x.png", image))
    assert (height, width) == image.shape[:2]
    np.testing.assert_array_equal(pixels, image)


def test_line_plot_places_markers_linearly_and_on_log_axes(tmp_path):
    rng = np.random.default_rng()
    n = int(rng.integers(4, 8))
    slope, offset = rng.uniform(0.5, 3.0), rng.uniform(-5.0, 5.0)
    xs = np.arange(n, dtype=float)
    path = line_plot(
        tmp_path / "sub" / "lin.png",
        {"rising": (list(xs), list(slope * xs + offset)), "doubling gaps": ([0.0, 1.0, 3.0, 7.0], [offset - 2.0] * 4)},
        title="Test: linear", xlabel="x", ylabel="y", size=(640, 420),
    )
    width, height, pixels = decode_png(path)
    assert (width, height) == (640, 420)

    rising = marker_centres(colour_mask(pixels, FIRST))
    assert len(rising) == n + 1  # n data points + the legend swatch at the far right
    points, swatch = rising[:n], rising[n]
    assert swatch[1] > points[:, 1].max()
    # Equal x steps give equal column steps; y rises linearly so rows fall linearly.
    np.testing.assert_allclose(np.diff(points[:, 1]), np.diff(points[:, 1]).mean(), atol=2.0)
    np.testing.assert_allclose(np.diff(points[:, 0]), np.diff(points[:, 0]).mean(), atol=2.0)
    assert (np.diff(points[:, 0]) < 0).all()

    # Second series: gaps of 1, 2, 4 in x are gaps of 1, 2, 4 units of columns.
    gaps = np.diff(marker_centres(colour_mask(pixels, SECOND))[:4, 1])
    np.testing.assert_allclose(gaps / gaps[0], [1.0, 2.0, 4.0], rtol=0.05)

    path = line_plot(tmp_path / "log.png", {"log-spaced": ([10.0**k for k in range(n)], [2.0**k for k in range(n)])},
                     title="log", xlabel="x", ylabel="y", log_x=True, log_y=True)
    points = marker_centres(colour_mask(decode_png(path)[2], FIRST))[:n]
    np.testing.assert_allclose(np.diff(points[:, 1]), np.diff(points[:, 1]).mean(), atol=2.0)
    np.testing.assert_allclose(np.diff(points[:, 0]), np.diff(points[:, 0]).mean(), atol=2.0)


def test_line_plot_draws_title_and_breaks_lines_at_missing_points(tmp_path):
    path = line_plot(tmp_path / "gap.png", {"a": ([1, 2, 3, 4], [1.0, None, float("nan"), 4.0])},
                     title="Gap", xlabel="x", ylabel="y")
    _, _, pixels = decode_png(path)
    mask = colour_mask(pixels, FIRST)
    points = marker_centres(mask)
    assert len(points) == 3  # two data points + legend swatch
    # No line between the two remaining points: the columns between them hold no series colour.
    between = mask[:, int(points[0, 1]) + 6 : int(points[1, 1]) - 6]
    assert not between.any()
    ink = (pixels == 0).all(axis=2)
    assert ink[:30].any()  # the title is drawn in black at the top


def test_bar_plot_heights_are_proportional_to_values(tmp_path):
    rng = np.random.default_rng()
    first = rng.uniform(1.0, 100.0, size=3)
    second = rng.uniform(1.0, 100.0, size=3)
    path = bar_plot(tmp_path / "bars.png", ["a", "b", "c"], {"one": list(first), "two": list(second)},
                    title="Bars", ylabel="ms")
    _, _, pixels = decode_png(path)
    for colour, values in ((FIRST, first), (SECOND, second)):
        mask = colour_mask(pixels, colour)
        cols = np.nonzero(mask.any(axis=0))[0]
        groups = np.split(cols, np.nonzero(np.diff(cols) > 1)[0] + 1)
        assert len(groups) == 4  # three bars + the legend swatch
        heights = np.array([mask[:, g].sum(axis=0).max() for g in groups[:3]], dtype=float)
        # Heights share one pixels-per-unit scale (bars end on the zero line, +-1 px rounding).
        scale = heights / values
        np.testing.assert_allclose(scale, scale.mean(), atol=2.0 / values.min())


def test_bad_arguments_name_the_problem(tmp_path):
    with pytest.raises(ValueError, match="series\\['a'\\] has 2 x values but 3 y values"):
        line_plot(tmp_path / "x.png", {"a": ([1, 2], [1, 2, 3])}, title="t", xlabel="x", ylabel="y")
    with pytest.raises(ValueError, match="log y axis"):
        line_plot(tmp_path / "x.png", {"a": ([1, 2], [0, 2])}, title="t", xlabel="x", ylabel="y", log_y=True)
    with pytest.raises(ValueError, match="2 values but there are 3 categories"):
        bar_plot(tmp_path / "x.png", ["a", "b", "c"], {"s": [1, 2]}, title="t", ylabel="y")
    with pytest.raises(TypeError, match="size must be a \\(width, height\\)"):
        bar_plot(tmp_path / "x.png", ["a"], {"s": [1]}, title="t", ylabel="y", size=(10,))
    with pytest.raises(TypeError, match="sequence of numbers"):
        bar_plot(tmp_path / "x.png", ["a"], {"s": ["fast"]}, title="t", ylabel="y")


def test_log_axis_always_gets_at_least_two_ticks_inside_the_data_range():
    from benchkit.plot import _Axis

    rng = np.random.default_rng()
    for _ in range(200):
        lo = 10.0 ** rng.uniform(-6, 6)
        hi = lo * 10.0 ** rng.uniform(0.01, 4)
        axis = _Axis(np.array([lo, hi]), log=True)
        assert len(axis.ticks) >= 2, (lo, hi, axis.ticks)
        assert all(lo * (1 - 1e-6) <= t <= hi * (1 + 1e-6) for t in axis.ticks), (lo, hi, axis.ticks)


def test_too_many_series_is_an_error(tmp_path):
    series = {f"s{i}": ([1, 2], [1, 2]) for i in range(9)}
    with pytest.raises(ValueError, match="9 entries; at most 8"):
        line_plot(tmp_path / "x.png", series, title="t", xlabel="x", ylabel="y")
