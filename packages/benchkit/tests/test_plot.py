"""benchkit.plot: the data lands where it belongs on the figures, log axes read as plain numbers,
and the files are what their format says."""

import numpy as np
import pytest
from matplotlib.path import Path as MplPath

from benchkit.plot import bar_plot, line_plot, log_ticks, save_figure


def display_points(axes, line):
    """The line's finite data points in display (pixel) coordinates, after layout."""
    data = line.get_xydata()
    return axes.transData.transform(data[np.isfinite(data).all(axis=1)])


def test_line_plot_places_points_linearly_and_on_log_axes():
    rng = np.random.default_rng()
    n = int(rng.integers(4, 8))
    slope, offset = rng.uniform(0.5, 3.0), rng.uniform(-5.0, 5.0)
    xs = np.arange(n, dtype=float)
    figure = line_plot(
        {"rising": (list(xs), list(slope * xs + offset)), "doubling gaps": ([0.0, 1.0, 3.0, 7.0], [offset - 2.0] * 4)},
        title="Test: linear",
        xlabel="x",
        ylabel="y",
    )
    figure.draw_without_rendering()
    axes = figure.axes[0]
    rising, gaps = axes.get_lines()
    points = display_points(axes, rising)
    # Equal x steps give equal horizontal steps; y rises linearly, so the points rise by equal steps.
    np.testing.assert_allclose(np.diff(points[:, 0]), np.diff(points[:, 0]).mean(), rtol=1e-6)
    np.testing.assert_allclose(np.diff(points[:, 1]), np.diff(points[:, 1]).mean(), rtol=1e-6)
    assert (np.diff(points[:, 1]) > 0).all()
    # Second series: gaps of 1, 2, 4 in x are gaps of 1, 2, 4 units horizontally.
    steps = np.diff(display_points(axes, gaps)[:, 0])
    np.testing.assert_allclose(steps / steps[0], [1.0, 2.0, 4.0], rtol=1e-6)
    assert [text.get_text() for text in axes.get_legend().get_texts()] == ["rising", "doubling gaps"]

    figure = line_plot(
        {"log-spaced": ([10.0**k for k in range(n)], [2.0**k for k in range(n)])},
        title="log",
        xlabel="x",
        ylabel="y",
        log_x=True,
        log_y=True,
    )
    figure.draw_without_rendering()
    axes = figure.axes[0]
    points = display_points(axes, axes.get_lines()[0])
    steps = np.diff(points, axis=0)
    np.testing.assert_allclose(steps, np.broadcast_to(steps.mean(axis=0), steps.shape), rtol=1e-6)


def test_line_plot_draws_title_and_breaks_lines_at_missing_points():
    figure = line_plot({"a": ([1, 2, 3, 4], [1.0, None, float("nan"), 4.0])}, title="Gap", xlabel="x", ylabel="y")
    axes = figure.axes[0]
    assert axes.get_title() == "Gap" and axes.get_xlabel() == "x" and axes.get_ylabel() == "y"
    (line,) = axes.get_lines()
    # Two pieces of one point each: the path starts anew (MOVETO) after the missing points, no segment between.
    codes = line.get_path().cleaned(remove_nans=True).codes
    assert list(codes).count(MplPath.MOVETO) == 2 and MplPath.LINETO not in codes


def test_bar_plot_heights_are_the_values_from_zero():
    rng = np.random.default_rng()
    first, second = rng.uniform(1.0, 100.0, size=3), rng.uniform(1.0, 100.0, size=3)
    second[1] = np.nan  # a missing value: no bar
    figure = bar_plot(
        ["a", "b", "c"], {"one": list(first), "two": [second[0], None, second[2]]}, title="Bars", ylabel="ms"
    )
    figure.draw_without_rendering()
    axes = figure.axes[0]
    assert axes.get_ylim()[0] == 0
    one, two = axes.containers
    np.testing.assert_allclose([bar.get_height() for bar in one], first)
    np.testing.assert_allclose([bar.get_height() for bar in two], second[[0, 2]])
    # On screen: one pixels-per-unit scale for every bar, from the zero line.
    bars = [*one, *two]
    zero_line = axes.transData.transform([(0, 0)])[0, 1]
    pixels = np.array([axes.transData.transform([(0, bar.get_height())])[0, 1] - zero_line for bar in bars])
    heights = np.array([bar.get_height() for bar in bars])
    np.testing.assert_allclose(pixels / heights, (pixels / heights).mean(), rtol=1e-6)
    assert [label.get_text() for label in axes.get_xticklabels()] == ["a", "b", "c"]


def test_a_log_axis_over_the_data_values_is_labelled_at_them():
    # The attention figure of a CPU tour: N = 32, 64, 128. Matplotlib's own log axis labels only "100" there.
    figure = line_plot(
        {"naive": ([32, 64, 128], [0.9, 2.1, 7.5]), "sdpa": ([32, 64, 128], [0.31, 0.52, 1.1])},
        title="t",
        xlabel="N",
        ylabel="ms",
        log_x=True,
        log_y=True,
    )
    figure.draw_without_rendering()
    axes = figure.axes[0]
    assert [label.get_text() for label in axes.get_xticklabels()] == ["32", "64", "128"]
    assert [label.get_text() for label in axes.get_yticklabels()] == ["0.5", "1", "2", "5"]


def test_log_ticks_give_at_least_two_plain_values_inside_any_range():
    rng = np.random.default_rng()
    for _ in range(500):
        low = 10.0 ** rng.uniform(-6, 6)
        high = low * 10.0 ** rng.uniform(0.001, 6)
        ticks = log_ticks(low, high)
        assert 2 <= len(ticks) <= 12, (low, high, ticks)
        assert all(low * (1 - 1e-9) <= t <= high * (1 + 1e-9) for t in ticks), (low, high, ticks)
        assert ticks == sorted(ticks)
    assert log_ticks(3.0, 300.0) == [5.0, 10.0, 20.0, 50.0, 100.0, 200.0]
    assert log_ticks(1.0, 2.0**14) == [1.0, 10.0, 100.0, 1000.0, 10000.0]  # 1-2-5 marks would be 13


def test_bad_arguments_name_the_problem():
    with pytest.raises(ValueError, match="series\\['a'\\] has 2 x values but 3 y values"):
        line_plot({"a": ([1, 2], [1, 2, 3])}, title="t", xlabel="x", ylabel="y")
    with pytest.raises(ValueError, match="log y axis"):
        line_plot({"a": ([1, 2], [0, 2])}, title="t", xlabel="x", ylabel="y", log_y=True)
    with pytest.raises(ValueError, match="no finite"):
        line_plot({"a": ([1, 2], [None, None])}, title="t", xlabel="x", ylabel="y")
    with pytest.raises(ValueError, match="2 values but there are 3 categories"):
        bar_plot(["a", "b", "c"], {"s": [1, 2]}, title="t", ylabel="y")
    with pytest.raises(TypeError, match="sequence of numbers"):
        bar_plot(["a"], {"s": ["fast"]}, title="t", ylabel="y")


@pytest.mark.parametrize("format, magic", [("png", b"\x89PNG\r\n\x1a\n"), ("svg", b"<?xml"), ("pdf", b"%PDF")])
def test_save_figure_writes_each_format(tmp_path, format, magic):
    figure = bar_plot(["small"], {"fp32": [1.0]}, title="t", ylabel="ms")
    path = save_figure(figure, tmp_path / "new", "ddp_2.7B", format)  # a name with a dot keeps it
    assert path == tmp_path / "new" / f"ddp_2.7B.{format}"
    assert path.read_bytes().startswith(magic)
    with pytest.raises(ValueError, match="format must be one of"):
        save_figure(figure, tmp_path, "x", "jpg")
