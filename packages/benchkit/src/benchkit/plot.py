"""Figures of benchkit's results, drawn by matplotlib: line charts and grouped bar charts.

Each function returns a :class:`matplotlib.figure.Figure` built with matplotlib's
object-oriented API (no ``pyplot``: no global state, no display needed), which
the caller can restyle (titles, labels, colours, ``figure.set_size_inches``)
before :func:`save_figure` writes it as PNG (through matplotlib's Agg renderer),
SVG or PDF. Style settings apply as usual: a ``matplotlibrc``, or
``with matplotlib.style.context("ggplot"):`` around the call that draws.

Missing values (None or NaN, e.g. a benchmark cell that ran out of memory) are
left out: a line breaks there, and no bar is drawn.

Log axes are labelled with plain numbers (10,000 rather than 1e+04): an x axis with few distinct values
gets a tick at each value (32, 64, 128), other log axes get ticks at 1, 2 and 5
times powers of ten that lie inside the data's range (at least two).

Example::

    from benchkit.plot import bar_plot, line_plot, save_figure

    figure = line_plot(
        {"naive": ([128, 256, 512], [0.1, 0.4, None]), "sdpa": ([128, 256, 512], [0.05, 0.1, 0.3])},
        title="Attention forward",
        xlabel="sequence length",
        ylabel="ms",
        log_x=True,
        log_y=True,
    )
    save_figure(figure, "/tmp", "attention", "svg")  # /tmp/attention.svg
    figure = bar_plot(["small", "medium"], {"fp32": [12.0, 30.0], "bf16": [5.0, 11.0]}, title="Step time", ylabel="ms")
    save_figure(figure, "/tmp", "steps")  # /tmp/steps.png
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter

__all__ = ["FORMATS", "bar_plot", "line_plot", "save_figure"]

FORMATS = ("png", "svg", "pdf")
FIGURE_INCHES = (8.0, 5.0)  # 800 x 500 pixels in PNG at DPI
DPI = 100
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")  # with the colour cycle, tells series apart in grey too
MAX_VALUE_TICKS = 12  # an x axis with at most this many distinct values gets a tick at each
BAR_INCHES = 0.9  # width per group of bars, so that long category labels keep their room
SIDE_BY_SIDE_CHARACTERS = 60  # category labels, at the default font size, that fit across FIGURE_INCHES


def _as_values(values: Sequence[float | None], what: str) -> np.ndarray:
    """Float array of ``values`` with None as NaN; TypeError names ``what`` otherwise."""
    try:
        return np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{what} must be a sequence of numbers (None for a missing value): {error}") from None


def _plain_number(value: float, _position: int | None = None) -> str:
    """A tick label: whole thousands and more with separators ("10,000", not "1e+04"), else the shortest form."""
    return f"{value:,.0f}" if value >= 1000 and value == round(value) else f"{value:g}"


def log_ticks(low: float, high: float) -> list[float]:
    """Tick values for a log axis showing ``low`` .. ``high`` (both > 0): 1, 2 and 5 times
    powers of ten inside the range; if fewer than two lie there, 1 to 9 times powers of
    ten; if still fewer, ``low`` and ``high`` themselves. More than :data:`MAX_VALUE_TICKS`
    marks are thinned to powers of ten (every k-th)."""
    decades = range(math.floor(math.log10(low)), math.floor(math.log10(high)) + 1)
    ticks: list[float] = []
    for mantissas in ((1, 2, 5), range(1, 10)):
        # float("2e-3"), not 2 * 10.0**-3: the nearest float to the decimal, so that labels read "0.002".
        ticks = [float(f"{m}e{e}") for e in decades for m in mantissas]
        ticks = [t for t in ticks if low * (1 - 1e-9) <= t <= high * (1 + 1e-9)]
        if len(ticks) >= 2:
            break
    if len(ticks) < 2:
        return [low, high] if low != high else [low]
    if len(ticks) > MAX_VALUE_TICKS:
        powers = [float(f"1e{e}") for e in decades if low <= float(f"1e{e}") <= high]
        stride = math.ceil(len(powers) / MAX_VALUE_TICKS)
        ticks = powers[::stride]
    return ticks


def _log_axis(axis, values: np.ndarray, *, at_values: bool) -> None:
    """Label a log axis with plain numbers, at the data's values if ``at_values`` and they are few."""
    distinct = np.unique(values)
    if at_values and len(distinct) <= MAX_VALUE_TICKS:
        ticks = [float(v) for v in distinct]
    else:
        ticks = log_ticks(float(distinct.min()), float(distinct.max()))
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(_plain_number))
    axis.set_minor_locator(LogLocator(base=10, subs=tuple(range(2, 10))))
    axis.set_minor_formatter(NullFormatter())


def _new_figure(title: str, xlabel: str, ylabel: str, width: float = FIGURE_INCHES[0]):
    figure = Figure(figsize=(width, FIGURE_INCHES[1]), dpi=DPI, layout="constrained")
    axes = figure.add_subplot()
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(True, which="major", alpha=0.3)
    return figure, axes


def line_plot(
    series: Mapping[str, tuple[Sequence[float], Sequence[float | None]]],
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    log_x: bool = False,
    log_y: bool = False,
) -> Figure:
    """One line per series, with a marker at each data point.

    Arguments:
        series: legend label -> ``(x values, y values)`` of equal length. None or NaN
            marks a missing point; the line breaks there.
        title, xlabel, ylabel: text above the chart and along its axes.
        log_x, log_y: base-10 logarithmic axes (the values on them must be positive).

    Returns:
        The figure, for :func:`save_figure` (or any of matplotlib's own methods).
    """
    if not series:
        raise ValueError("series must hold at least one (x, y) pair of sequences")
    data = {}
    for label, pair in series.items():
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"series[{label!r}] must be an (x values, y values) pair")
        xs, ys = _as_values(pair[0], f"series[{label!r}] x"), _as_values(pair[1], f"series[{label!r}] y")
        if len(xs) != len(ys):
            raise ValueError(f"series[{label!r}] has {len(xs)} x values but {len(ys)} y values")
        for name, values, is_log in (("x", xs, log_x), ("y", ys, log_y)):
            if is_log and (values[np.isfinite(values)] <= 0).any():
                raise ValueError(f"series[{label!r}] has {name} values <= 0, which a log {name} axis cannot show")
        data[str(label)] = (xs, ys)
    present = [np.isfinite(xs) & np.isfinite(ys) for xs, ys in data.values()]
    if not any(p.any() for p in present):
        raise ValueError("series hold no finite (x, y) point to plot")

    figure, axes = _new_figure(title, xlabel, ylabel)
    for index, (label, (xs, ys)) in enumerate(data.items()):
        axes.plot(xs, ys, marker=MARKERS[index % len(MARKERS)], label=label)
    all_x = np.concatenate([xs[p] for (xs, _), p in zip(data.values(), present)])
    all_y = np.concatenate([ys[p] for (_, ys), p in zip(data.values(), present)])
    if log_x:
        axes.set_xscale("log")
        _log_axis(axes.xaxis, all_x, at_values=True)
    if log_y:
        axes.set_yscale("log")
        _log_axis(axes.yaxis, all_y, at_values=False)
    axes.legend()
    return figure


def bar_plot(
    categories: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    *,
    title: str,
    ylabel: str,
) -> Figure:
    """A grouped bar chart: one group per category, one bar per series in each group.

    Arguments:
        categories: group labels along the x axis.
        series: legend label -> one value per category (None or NaN: no bar).
        title, ylabel: text above the chart and along the y axis.

    The y axis starts at 0, so bar heights are proportional to the values. The figure
    widens with the number of groups, so that their labels keep room.

    Returns:
        The figure, for :func:`save_figure`.
    """
    categories = [str(c) for c in categories]
    if not categories:
        raise ValueError("categories must name at least one group")
    if not series:
        raise ValueError("series must hold at least one sequence of values")
    data = {}
    for label, values in series.items():
        values = _as_values(values, f"series[{label!r}]")
        if len(values) != len(categories):
            raise ValueError(f"series[{label!r}] has {len(values)} values but there are {len(categories)} categories")
        data[str(label)] = values
    if not any(np.isfinite(values).any() for values in data.values()):
        raise ValueError("series hold no finite value to plot")

    figure, axes = _new_figure(title, "", ylabel, width=max(FIGURE_INCHES[0], BAR_INCHES * len(categories)))
    positions = np.arange(len(categories))
    width = 0.8 / len(data)  # 80% of each group is bars, 20% the gap between groups
    for index, (label, values) in enumerate(data.items()):
        shown = np.isfinite(values)
        axes.bar(positions[shown] + (index - (len(data) - 1) / 2) * width, values[shown], width, label=label)
    # Labels side by side run into each other beyond about this many characters in all.
    slanted = max(map(len, categories)) * len(categories) > SIDE_BY_SIDE_CHARACTERS
    axes.set_xticks(positions, categories, rotation=30 if slanted else 0, ha="right" if slanted else "center")
    axes.set_ylim(bottom=0)
    axes.grid(False, axis="x")
    axes.legend()
    return figure


def save_figure(figure: Figure, folder: str | Path, name: str, format: str = "png") -> Path:
    """Write ``figure`` as ``folder/name.<format>`` (png, svg or pdf; folders are created, ``name`` may
    hold a subfolder); return the path."""
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    path = Path(folder) / f"{name}.{format}"  # not with_suffix: names like "ddp_2.7B" hold dots
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format=format)
    return path
