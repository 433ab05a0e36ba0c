"""PNG charts from numpy and zlib alone: line plots and grouped bar plots.

benchkit depends on numpy but not on matplotlib, so the charts every subcommand
draws are rasterized here: an RGB ``numpy`` canvas, a small built-in bitmap font,
and a PNG writer that emits the chunks of the PNG specification (W3C, "Portable
Network Graphics (PNG) Specification", 3rd edition) by hand: the 8-byte
signature, ``IHDR`` (8-bit RGB, no interlace), one zlib-compressed ``IDAT`` with
filter type 0 on every scanline, and ``IEND``; each chunk carries its CRC-32.

Example::

    from benchkit.plot import bar_plot, line_plot

    line_plot(
        "attention.png",
        {"naive": ([128, 256, 512], [0.1, 0.4, 1.6]), "sdpa": ([128, 256, 512], [0.05, 0.1, 0.3])},
        title="Attention forward", xlabel="sequence length", ylabel="ms", log_x=True, log_y=True,
    )
    bar_plot("steps.png", ["small", "medium"], {"fp32": [12.0, 30.0], "bf16": [5.0, 11.0]},
             title="Step time", ylabel="ms")

Missing values (``None`` or NaN, e.g. a benchmark cell that ran out of memory)
are left out of the chart: a line is broken there and no bar is drawn.
Characters the font does not have are drawn as a filled box, so they show up.
"""

from __future__ import annotations

import math
import struct
import zlib
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

__all__ = ["MAX_SERIES", "line_plot", "bar_plot", "write_png"]

# ---------------------------------------------------------------------------
# PNG writer
# ---------------------------------------------------------------------------

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"  # PNG spec section 5.2
_COLOR_TYPE_RGB = 2  # PNG spec table 11.1: truecolour, 3 samples per pixel
_FILTER_NONE = 0  # PNG spec section 9.2: filter type 0 ("None")


def _chunk(kind: bytes, data: bytes) -> bytes:
    """One PNG chunk: length, type, data, CRC-32 of type + data (PNG spec section 5.3)."""
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def write_png(path: str | Path, image: np.ndarray) -> Path:
    """Write ``image`` (uint8, shape ``(height, width, 3)``, RGB) as a PNG file; return the path."""
    if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise TypeError("image must be a uint8 numpy array of shape (height, width, 3)")
    height, width, _ = image.shape
    if height == 0 or width == 0:
        raise ValueError(f"image must have a non-zero size, got {height}x{width}")
    header = struct.pack(">IIBBBBB", width, height, 8, _COLOR_TYPE_RGB, 0, 0, 0)
    scanlines = np.empty((height, 1 + 3 * width), dtype=np.uint8)
    scanlines[:, 0] = _FILTER_NONE
    scanlines[:, 1:] = image.reshape(height, 3 * width)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(
        _PNG_SIGNATURE
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(scanlines.tobytes(), 9))
        + _chunk(b"IEND", b"")
    )
    return path


# ---------------------------------------------------------------------------
# Bitmap font: 5 pixels wide, 7 above the baseline and 2 below (descenders).
# Each glyph lists its rows top to bottom; '#' is ink. Glyphs given with 7 rows
# sit on the baseline; 9-row glyphs use the descender rows.
# ---------------------------------------------------------------------------

_GLYPH_WIDTH = 5
_GLYPH_HEIGHT = 9
_GLYPH_ADVANCE = _GLYPH_WIDTH + 1  # one blank column between characters

_GLYPH_ROWS = {
    " ": ".....|.....|.....|.....|.....|.....|.....",
    "0": ".###.|#...#|#..##|#.#.#|##..#|#...#|.###.",
    "1": "..#..|.##..|..#..|..#..|..#..|..#..|.###.",
    "2": ".###.|#...#|....#|...#.|..#..|.#...|#####",
    "3": "#####|...#.|..#..|...#.|....#|#...#|.###.",
    "4": "...#.|..##.|.#.#.|#..#.|#####|...#.|...#.",
    "5": "#####|#....|####.|....#|....#|#...#|.###.",
    "6": "..##.|.#...|#....|####.|#...#|#...#|.###.",
    "7": "#####|....#|...#.|..#..|.#...|.#...|.#...",
    "8": ".###.|#...#|#...#|.###.|#...#|#...#|.###.",
    "9": ".###.|#...#|#...#|.####|....#|...#.|.##..",
    "A": ".###.|#...#|#...#|#####|#...#|#...#|#...#",
    "B": "####.|#...#|#...#|####.|#...#|#...#|####.",
    "C": ".###.|#...#|#....|#....|#....|#...#|.###.",
    "D": "###..|#..#.|#...#|#...#|#...#|#..#.|###..",
    "E": "#####|#....|#....|####.|#....|#....|#####",
    "F": "#####|#....|#....|####.|#....|#....|#....",
    "G": ".###.|#...#|#....|#.###|#...#|#...#|.####",
    "H": "#...#|#...#|#...#|#####|#...#|#...#|#...#",
    "I": ".###.|..#..|..#..|..#..|..#..|..#..|.###.",
    "J": "..###|...#.|...#.|...#.|...#.|#..#.|.##..",
    "K": "#...#|#..#.|#.#..|##...|#.#..|#..#.|#...#",
    "L": "#....|#....|#....|#....|#....|#....|#####",
    "M": "#...#|##.##|#.#.#|#.#.#|#...#|#...#|#...#",
    "N": "#...#|#...#|##..#|#.#.#|#..##|#...#|#...#",
    "O": ".###.|#...#|#...#|#...#|#...#|#...#|.###.",
    "P": "####.|#...#|#...#|####.|#....|#....|#....",
    "Q": ".###.|#...#|#...#|#...#|#.#.#|#..#.|.##.#",
    "R": "####.|#...#|#...#|####.|#.#..|#..#.|#...#",
    "S": ".####|#....|#....|.###.|....#|....#|####.",
    "T": "#####|..#..|..#..|..#..|..#..|..#..|..#..",
    "U": "#...#|#...#|#...#|#...#|#...#|#...#|.###.",
    "V": "#...#|#...#|#...#|#...#|#...#|.#.#.|..#..",
    "W": "#...#|#...#|#...#|#.#.#|#.#.#|#.#.#|.#.#.",
    "X": "#...#|#...#|.#.#.|..#..|.#.#.|#...#|#...#",
    "Y": "#...#|#...#|.#.#.|..#..|..#..|..#..|..#..",
    "Z": "#####|....#|...#.|..#..|.#...|#....|#####",
    "a": ".....|.....|.###.|....#|.####|#...#|.####",
    "b": "#....|#....|####.|#...#|#...#|#...#|####.",
    "c": ".....|.....|.###.|#....|#....|#...#|.###.",
    "d": "....#|....#|.####|#...#|#...#|#...#|.####",
    "e": ".....|.....|.###.|#...#|#####|#....|.###.",
    "f": "..##.|.#..#|.#...|###..|.#...|.#...|.#...",
    "g": ".....|.....|.####|#...#|#...#|#...#|.####|....#|.###.",
    "h": "#....|#....|#.##.|##..#|#...#|#...#|#...#",
    "i": "..#..|.....|.##..|..#..|..#..|..#..|.###.",
    "j": "...#.|.....|..##.|...#.|...#.|...#.|...#.|#..#.|.##..",
    "k": "#....|#....|#..#.|#.#..|##...|#.#..|#..#.",
    "l": ".##..|..#..|..#..|..#..|..#..|..#..|.###.",
    "m": ".....|.....|##.#.|#.#.#|#.#.#|#.#.#|#.#.#",
    "n": ".....|.....|#.##.|##..#|#...#|#...#|#...#",
    "o": ".....|.....|.###.|#...#|#...#|#...#|.###.",
    "p": ".....|.....|####.|#...#|#...#|#...#|####.|#....|#....",
    "q": ".....|.....|.####|#...#|#...#|#...#|.####|....#|....#",
    "r": ".....|.....|#.##.|##..#|#....|#....|#....",
    "s": ".....|.....|.####|#....|.###.|....#|####.",
    "t": ".#...|.#...|###..|.#...|.#...|.#..#|..##.",
    "u": ".....|.....|#...#|#...#|#...#|#..##|.##.#",
    "v": ".....|.....|#...#|#...#|#...#|.#.#.|..#..",
    "w": ".....|.....|#...#|#...#|#.#.#|#.#.#|.#.#.",
    "x": ".....|.....|#...#|.#.#.|..#..|.#.#.|#...#",
    "y": ".....|.....|#...#|#...#|#...#|#...#|.####|....#|.###.",
    "z": ".....|.....|#####|...#.|..#..|.#...|#####",
    ".": ".....|.....|.....|.....|.....|.##..|.##..",
    ",": ".....|.....|.....|.....|.....|.##..|.##..|..#..|.#...",
    ":": ".....|.##..|.##..|.....|.##..|.##..|.....",
    ";": ".....|.##..|.##..|.....|.##..|.##..|..#..|.#...",
    "-": ".....|.....|.....|#####|.....|.....|.....",
    "+": ".....|..#..|..#..|#####|..#..|..#..|.....",
    "_": ".....|.....|.....|.....|.....|.....|.....|.....|#####",
    "/": ".....|....#|...#.|..#..|.#...|#....|.....",
    "(": "...#.|..#..|.#...|.#...|.#...|..#..|...#.",
    ")": ".#...|..#..|...#.|...#.|...#.|..#..|.#...",
    "[": ".###.|.#...|.#...|.#...|.#...|.#...|.###.",
    "]": ".###.|...#.|...#.|...#.|...#.|...#.|.###.",
    "%": "##...|##..#|...#.|..#..|.#...|#..##|...##",
    "=": ".....|.....|#####|.....|#####|.....|.....",
    "*": ".....|..#..|#.#.#|.###.|#.#.#|..#..|.....",
    "'": "..#..|..#..|.#...|.....|.....|.....|.....",
    '"': ".#.#.|.#.#.|.....|.....|.....|.....|.....",
    "!": "..#..|..#..|..#..|..#..|..#..|.....|..#..",
    "?": ".###.|#...#|....#|...#.|..#..|.....|..#..",
    "<": "...#.|..#..|.#...|#....|.#...|..#..|...#.",
    ">": ".#...|..#..|...#.|....#|...#.|..#..|.#...",
    "|": "..#..|..#..|..#..|..#..|..#..|..#..|..#..",
    "#": ".#.#.|.#.#.|#####|.#.#.|#####|.#.#.|.#.#.",
    "^": "..#..|.#.#.|#...#|.....|.....|.....|.....",
    "±": "..#..|..#..|#####|..#..|..#..|.....|#####",
    "×": ".....|#...#|.#.#.|..#..|.#.#.|#...#|.....",
    "²": ".##..|...#.|..#..|.###.|.....|.....|.....",
    "µ": ".....|.....|#...#|#...#|#...#|#..##|###.#|#....|#....",
}


def _glyph_bitmap(rows: str) -> np.ndarray:
    lines = rows.split("|")
    bitmap = np.zeros((_GLYPH_HEIGHT, _GLYPH_WIDTH), dtype=bool)
    for r, line in enumerate(lines):
        bitmap[r] = [c == "#" for c in line]
    return bitmap


_GLYPHS = {char: _glyph_bitmap(rows) for char, rows in _GLYPH_ROWS.items()}
_MISSING_GLYPH = np.zeros((_GLYPH_HEIGHT, _GLYPH_WIDTH), dtype=bool)
_MISSING_GLYPH[0:7, :] = True  # a filled box marks a character the font lacks


def _text_mask(text: str, scale: int = 1) -> np.ndarray:
    """Boolean ink mask of ``text`` in the built-in font, ``(9*scale, 6*len*scale)`` pixels."""
    width = max(len(text) * _GLYPH_ADVANCE - 1, 1)
    mask = np.zeros((_GLYPH_HEIGHT, width), dtype=bool)
    for i, char in enumerate(text):
        x = i * _GLYPH_ADVANCE
        mask[:, x : x + _GLYPH_WIDTH] = _GLYPHS.get(char, _MISSING_GLYPH)
    return np.kron(mask, np.ones((scale, scale), dtype=bool))


def _text_width(text: str, scale: int = 1) -> int:
    return _text_mask(text, scale).shape[1]


# ---------------------------------------------------------------------------
# Canvas
# ---------------------------------------------------------------------------

_BLACK = (0, 0, 0)
_GRID = (226, 226, 226)
# Series colours: saturated, far apart in hue, none of them grey.
_PALETTE = [
    (28, 99, 196),
    (222, 94, 22),
    (34, 150, 62),
    (200, 30, 60),
    (128, 72, 184),
    (0, 160, 170),
    (176, 120, 20),
    (220, 60, 170),
]
_MARKERS = ["circle", "square", "triangle", "diamond"]
MAX_SERIES = len(_PALETTE)  # beyond this, colours would repeat and two series could look alike
_MARKER_RADIUS = 4  # pixels; the line is 2 pixels wide, so markers stand out
_LINE_WIDTH = 2
_TICK_LENGTH = 5


class _Canvas:
    """An RGB image with the few drawing operations the charts need."""

    def __init__(self, width: int, height: int):
        self.pixels = np.full((height, width, 3), 255, dtype=np.uint8)

    @property
    def height(self) -> int:
        return self.pixels.shape[0]

    @property
    def width(self) -> int:
        return self.pixels.shape[1]

    def put(self, rows: np.ndarray, cols: np.ndarray, color) -> None:
        rows = np.asarray(rows, dtype=np.int64).ravel()
        cols = np.asarray(cols, dtype=np.int64).ravel()
        keep = (rows >= 0) & (rows < self.height) & (cols >= 0) & (cols < self.width)
        self.pixels[rows[keep], cols[keep]] = color

    def rect(self, top: int, left: int, bottom: int, right: int, color) -> None:
        """Fill rows ``top..bottom`` and columns ``left..right`` inclusive."""
        top, bottom = sorted((int(top), int(bottom)))
        left, right = sorted((int(left), int(right)))
        top, left = max(top, 0), max(left, 0)
        self.pixels[top : bottom + 1, left : right + 1] = color

    def line(self, r0: float, c0: float, r1: float, c1: float, color, width: int = 1) -> None:
        """Draw a segment by sampling it every half pixel and stamping a ``width``-pixel square."""
        steps = int(math.ceil(max(abs(r1 - r0), abs(c1 - c0)) * 2)) + 1
        t = np.linspace(0.0, 1.0, steps)
        rows = np.rint(r0 + (r1 - r0) * t).astype(np.int64)
        cols = np.rint(c0 + (c1 - c0) * t).astype(np.int64)
        offsets = np.arange(width) - (width - 1) // 2
        for dr in offsets:
            for dc in offsets:
                self.put(rows + dr, cols + dc, color)

    def marker(self, row: float, col: float, shape: str, color) -> None:
        r = _MARKER_RADIUS
        dr, dc = np.mgrid[-r : r + 1, -r : r + 1]
        if shape == "circle":
            inside = dr * dr + dc * dc <= r * r + 1
        elif shape == "square":
            inside = np.ones_like(dr, dtype=bool)
        elif shape == "triangle":
            inside = np.abs(dc) * 2 <= dr + r  # apex on top, base at the bottom row
        else:  # diamond
            inside = np.abs(dr) + np.abs(dc) <= r
        self.put(int(round(row)) + dr[inside], int(round(col)) + dc[inside], color)

    def text(self, text: str, row: int, col: int, color=_BLACK, scale: int = 1, anchor: str = "left",
             rotate: bool = False) -> None:
        """Draw ``text`` with its top edge at ``row``; ``anchor`` says whether ``col`` is its left, centre or right.

        ``rotate`` turns the text 90 degrees counter-clockwise (reads bottom to top);
        then ``row`` is the vertical centre and ``col`` the left edge.
        """
        mask = _text_mask(text, scale)
        if rotate:
            mask = np.rot90(mask)
            row = row - mask.shape[0] // 2
        else:
            col = {"left": col, "center": col - mask.shape[1] // 2, "right": col - mask.shape[1] + 1}[anchor]
        rows, cols = np.nonzero(mask)
        self.put(rows + row, cols + col, color)


# ---------------------------------------------------------------------------
# Axes: data range -> ticks -> pixels
# ---------------------------------------------------------------------------

_TARGET_TICKS = 6  # about this many tick labels per axis


def _nice_step(span: float) -> float:
    """A step of the form 1, 2 or 5 times a power of ten giving about ``_TARGET_TICKS`` ticks."""
    raw = span / _TARGET_TICKS
    power = 10.0 ** math.floor(math.log10(raw))
    for multiple in (1.0, 2.0, 5.0, 10.0):
        if raw <= multiple * power:
            return multiple * power
    return 10.0 * power


def _format_tick(value: float) -> str:
    if value == 0:
        return "0"
    text = f"{value:.4g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}e{int(exponent)}"
    return text


class _Axis:
    """Maps data values on one axis to pixel positions and chooses its ticks.

    Arguments:
        values: every finite value plotted on this axis.
        log: logarithmic (base 10) axis; values must then be positive.
        include_zero: stretch the range to contain 0 (bar charts start at 0).
    """

    def __init__(self, values: np.ndarray, *, log: bool, include_zero: bool = False):
        self.log = log
        lo, hi = float(values.min()), float(values.max())
        if include_zero:
            lo, hi = min(lo, 0.0), max(hi, 0.0)
        if log:
            lo, hi = math.log10(lo), math.log10(hi)
            if hi - lo < 1e-12:
                lo, hi = lo - 0.5, hi + 0.5
            self.lo, self.hi = lo, hi
            self.ticks = self._log_ticks(lo, hi)
        else:
            if hi - lo < 1e-300 or (hi - lo) < 1e-12 * max(abs(lo), abs(hi)):
                pad = abs(lo) * 0.5 if lo != 0 else 1.0
                lo, hi = lo - pad, hi + pad
            step = _nice_step(hi - lo)
            # Extend the range to whole steps so the outer ticks frame the data.
            self.lo = math.floor(lo / step + 1e-9) * step
            self.hi = math.ceil(hi / step - 1e-9) * step
            count = int(round((self.hi - self.lo) / step))
            self.ticks = [self.lo + i * step for i in range(count + 1)]
            self.ticks = [0.0 if abs(t) < step * 1e-9 else t for t in self.ticks]

    @staticmethod
    def _log_ticks(lo: float, hi: float) -> list[float]:
        """Ticks for the range ``10**lo .. 10**hi``: powers of ten, else 1-2-5 marks, else linear steps."""

        def inside(value: float) -> bool:
            return lo - 1e-9 <= math.log10(value) <= hi + 1e-9

        first, last = math.floor(lo), math.ceil(hi)
        stride = max(1, int(math.ceil((last - first) / _TARGET_TICKS)))
        ticks = [10.0**e for e in range(first, last + 1, stride) if inside(10.0**e)]
        if len(ticks) < 3:  # under about two decades: add the 2x and 5x marks too
            ticks = sorted(m * 10.0**e for e in range(first, last + 1) for m in (1.0, 2.0, 5.0) if inside(m * 10.0**e))
        if len(ticks) < 2:  # a narrow range between two such marks: evenly spaced values
            step = _nice_step(10.0**hi - 10.0**lo)
            start = math.ceil(10.0**lo / step - 1e-9)
            ticks = [k * step for k in range(start, start + _TARGET_TICKS * 2) if inside(k * step)]
        return ticks

    def fraction(self, values) -> np.ndarray:
        """Position of ``values`` along the axis, 0 at the low end and 1 at the high end."""
        values = np.asarray(values, dtype=np.float64)
        if self.log:
            values = np.log10(values)
        return (values - self.lo) / (self.hi - self.lo)


# ---------------------------------------------------------------------------
# Shared frame: title, plot area, ticks, labels, legend
# ---------------------------------------------------------------------------

_MARGIN = 12  # pixels around everything
_INNER_PAD = 10  # pixels between the plot frame and the outermost data point
_LEGEND_SWATCH = 22  # pixels of sample line in each legend row
_LEGEND_ROW = 16  # pixels between legend rows


class _Frame:
    """Lays out a chart and draws everything except the data."""

    def __init__(self, canvas: _Canvas, *, title: str, xlabel: str, ylabel: str,
                 y_axis: _Axis, legend: Sequence[str]):
        self.canvas = canvas
        self.y_axis = y_axis
        y_labels = [_format_tick(t) for t in y_axis.ticks]
        y_label_width = max(_text_width(s) for s in y_labels)
        legend_width = max(_text_width(s) for s in legend) + _LEGEND_SWATCH + 8
        self.left = _MARGIN + (_GLYPH_HEIGHT + 6 if ylabel else 0) + y_label_width + 4 + _TICK_LENGTH
        self.right = canvas.width - _MARGIN - legend_width - 12
        self.top = _MARGIN + 2 * _GLYPH_HEIGHT + 10
        self.bottom = canvas.height - _MARGIN - (_GLYPH_HEIGHT + 6 if xlabel else 0) - _GLYPH_HEIGHT - 4 - _TICK_LENGTH
        if self.right - self.left < 60 or self.bottom - self.top < 60:
            raise ValueError(
                f"size {canvas.width}x{canvas.height} leaves too little room for the plot area; "
                "use a larger size or shorter labels"
            )
        canvas.text(title, _MARGIN, (self.left + self.right) // 2, scale=2, anchor="center")
        if xlabel:
            canvas.text(xlabel, canvas.height - _MARGIN - _GLYPH_HEIGHT, (self.left + self.right) // 2, anchor="center")
        if ylabel:
            canvas.text(ylabel, (self.top + self.bottom) // 2, _MARGIN, rotate=True)
        for tick, label in zip(y_axis.ticks, y_labels):
            row = int(round(self.row(tick)))
            canvas.rect(row, self.left + 1, row, self.right - 1, _GRID)
            canvas.rect(row, self.left - _TICK_LENGTH, row, self.left, _BLACK)
            canvas.text(label, row - 4, self.left - _TICK_LENGTH - 3, anchor="right")
        self.legend_left = self.right + 12
        self.legend_top = self.top

    def row(self, y) -> np.ndarray:
        span = self.bottom - self.top - 2 * _INNER_PAD
        return self.bottom - _INNER_PAD - self.y_axis.fraction(y) * span

    def x_tick(self, col: float, label: str, grid: bool) -> None:
        col = int(round(col))
        if grid:
            self.canvas.rect(self.top + 1, col, self.bottom - 1, col, _GRID)
        self.canvas.rect(self.bottom, col, self.bottom + _TICK_LENGTH, col, _BLACK)
        self.canvas.text(label, self.bottom + _TICK_LENGTH + 3, col, anchor="center")

    def box(self) -> None:
        """The plot frame, drawn last so data never covers it."""
        c = self.canvas
        c.rect(self.top, self.left, self.top, self.right, _BLACK)
        c.rect(self.bottom, self.left, self.bottom, self.right, _BLACK)
        c.rect(self.top, self.left, self.bottom, self.left, _BLACK)
        c.rect(self.top, self.right, self.bottom, self.right, _BLACK)

    def legend_row(self, index: int, label: str) -> tuple[int, int]:
        """Draw a legend label; return (row, column) of the centre of its swatch."""
        row = self.legend_top + index * _LEGEND_ROW
        self.canvas.text(label, row, self.legend_left + _LEGEND_SWATCH + 6)
        return row + 3, self.legend_left + _LEGEND_SWATCH // 2


# ---------------------------------------------------------------------------
# Public charts
# ---------------------------------------------------------------------------


def _as_values(values, what: str) -> np.ndarray:
    """Float array of ``values`` with ``None`` as NaN; TypeError names ``what`` otherwise."""
    try:
        return np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{what} must be a sequence of numbers (None for a missing value): {error}") from None


def _check_series_count(series: Mapping) -> None:
    if len(series) > MAX_SERIES:
        raise ValueError(f"series holds {len(series)} entries; at most {MAX_SERIES} can be told apart in one chart")


def _check_size(size) -> tuple[int, int]:
    if (not isinstance(size, tuple) or len(size) != 2
            or not all(isinstance(s, int) and s > 0 for s in size)):
        raise TypeError(f"size must be a (width, height) tuple of positive ints in pixels, got {size!r}")
    return size


def line_plot(
    path: str | Path,
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    log_x: bool = False,
    log_y: bool = False,
    size: tuple[int, int] = (800, 500),
) -> Path:
    """Draw one line per series, with markers at the data points, and write it as a PNG.

    Arguments:
        path: PNG file to write (parent folders are created).
        series: legend label -> ``(x values, y values)`` of equal length. ``None``
            or NaN marks a missing point; the line breaks there.
        title, xlabel, ylabel: text drawn above the plot and along the axes.
        log_x, log_y: base-10 logarithmic axes (values on them must be positive).
        size: ``(width, height)`` of the image in pixels.

    Returns:
        ``path`` as a :class:`pathlib.Path`.
    """
    width, height = _check_size(size)
    if not series:
        raise ValueError("series must hold at least one (x, y) pair of sequences")
    _check_series_count(series)
    data = {}
    for label, pair in series.items():
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"series[{label!r}] must be an (x values, y values) pair")
        xs, ys = _as_values(pair[0], f"series[{label!r}] x"), _as_values(pair[1], f"series[{label!r}] y")
        if len(xs) != len(ys):
            raise ValueError(f"series[{label!r}] has {len(xs)} x values but {len(ys)} y values")
        for name, values, is_log in (("x", xs, log_x), ("y", ys, log_y)):
            finite = values[np.isfinite(values)]
            if is_log and (finite <= 0).any():
                raise ValueError(f"series[{label!r}] has {name} values <= 0, which a log {name} axis cannot show")
        data[str(label)] = (xs, ys)
    present = [np.isfinite(xs) & np.isfinite(ys) for xs, ys in data.values()]
    if not any(p.any() for p in present):
        raise ValueError("series hold no finite (x, y) point to plot")
    all_x = np.concatenate([xs[p] for (xs, _), p in zip(data.values(), present)])
    all_y = np.concatenate([ys[p] for (_, ys), p in zip(data.values(), present)])
    x_axis = _Axis(all_x, log=log_x)
    y_axis = _Axis(all_y, log=log_y)

    canvas = _Canvas(width, height)
    frame = _Frame(canvas, title=title, xlabel=xlabel, ylabel=ylabel, y_axis=y_axis,
                   legend=list(data))

    def col(x):
        return frame.left + _INNER_PAD + x_axis.fraction(x) * (frame.right - frame.left - 2 * _INNER_PAD)

    for tick in x_axis.ticks:
        frame.x_tick(col(tick), _format_tick(tick), grid=True)
    for index, ((label, (xs, ys)), keep) in enumerate(zip(data.items(), present)):
        color = _PALETTE[index % len(_PALETTE)]
        shape = _MARKERS[index % len(_MARKERS)]
        rows, cols = frame.row(np.where(keep, ys, 1.0)), col(np.where(keep, xs, 1.0))
        for i in range(len(xs) - 1):
            if keep[i] and keep[i + 1]:
                canvas.line(rows[i], cols[i], rows[i + 1], cols[i + 1], color, _LINE_WIDTH)
        for i in np.nonzero(keep)[0]:
            canvas.marker(rows[i], cols[i], shape, color)
        row, mid = frame.legend_row(index, label)
        canvas.line(row, mid - _LEGEND_SWATCH // 2, row, mid + _LEGEND_SWATCH // 2, color, _LINE_WIDTH)
        canvas.marker(row, mid, shape, color)
    frame.box()
    return write_png(path, canvas.pixels)


def bar_plot(
    path: str | Path,
    categories: Sequence[str],
    series: Mapping[str, Sequence[float]],
    *,
    title: str,
    ylabel: str,
    size: tuple[int, int] = (800, 500),
) -> Path:
    """Draw a grouped bar chart: one group per category, one bar per series, and write it as a PNG.

    Arguments:
        path: PNG file to write (parent folders are created).
        categories: group labels along the x axis.
        series: legend label -> one value per category (``None`` or NaN: no bar).
        title, ylabel: text drawn above the plot and along the y axis.
        size: ``(width, height)`` of the image in pixels.

    The y axis always includes 0, so bar heights are proportional to the values.

    Returns:
        ``path`` as a :class:`pathlib.Path`.
    """
    width, height = _check_size(size)
    categories = [str(c) for c in categories]
    if not categories:
        raise ValueError("categories must name at least one group")
    if not series:
        raise ValueError("series must hold at least one sequence of values")
    _check_series_count(series)
    data = {}
    for label, values in series.items():
        values = _as_values(values, f"series[{label!r}]")
        if len(values) != len(categories):
            raise ValueError(
                f"series[{label!r}] has {len(values)} values but there are {len(categories)} categories"
            )
        data[str(label)] = values
    finite = np.concatenate([v[np.isfinite(v)] for v in data.values()])
    if finite.size == 0:
        raise ValueError("series hold no finite value to plot")
    y_axis = _Axis(finite, log=False, include_zero=True)

    canvas = _Canvas(width, height)
    frame = _Frame(canvas, title=title, xlabel="", ylabel=ylabel, y_axis=y_axis,
                   legend=list(data))
    group_width = (frame.right - frame.left) / len(categories)
    bar_width = max(1, int(group_width * 0.8 / len(data)))  # 80% of each group is bars, 20% gap
    zero_row = int(round(frame.row(0.0)))
    for g, category in enumerate(categories):
        centre = frame.left + (g + 0.5) * group_width
        frame.x_tick(centre, category, grid=False)
        first = centre - bar_width * len(data) / 2
        for index, values in enumerate(data.values()):
            if np.isfinite(values[g]):
                left = int(round(first + index * bar_width))
                top = int(round(frame.row(values[g])))
                canvas.rect(top, left, zero_row, left + bar_width - 2, _PALETTE[index % len(_PALETTE)])
    for index, label in enumerate(data):
        row, mid = frame.legend_row(index, label)
        canvas.rect(row - 4, mid - 4, row + 4, mid + 4, _PALETTE[index % len(_PALETTE)])
    canvas.rect(zero_row, frame.left, zero_row, frame.right, _BLACK)
    frame.box()
    return write_png(path, canvas.pixels)
