"""Aligned text tables for the benchmark report."""
from __future__ import annotations

__all__ = ["format_table", "fmt_time", "fmt_num"]


def fmt_time(t: dict | None, digits: int = 3) -> str:
    """``median [min-max]`` of a :func:`~dycore.bench.timing.stats` dict [ms]; ``-`` if None."""
    if not t:
        return "-"
    return (f"{t['median_ms']:.{digits}f} [{t['min_ms']:.{digits}f}-"
            f"{t['max_ms']:.{digits}f}]")


def fmt_num(x, spec: str = ".2f", suffix: str = "") -> str:
    """``format(x, spec) + suffix``, or ``-`` when ``x`` is None."""
    return "-" if x is None else f"{format(x, spec)}{suffix}"


def format_table(title: str, headers: list[str], rows: list[list[str]],
                 notes: list[str] | None = None) -> str:
    """An aligned text table: first column left-aligned, the others right-aligned.

    Parameters
    ----------
    title : str
        Printed above the table.
    headers : list of str
        Column headers.
    rows : list of list of str
        Cells, already formatted.
    notes : list of str, optional
        Lines printed below the table.

    Returns
    -------
    str
        The table, without a trailing newline.
    """
    cols = len(headers)
    width = [max([len(headers[c])] + [len(r[c]) for r in rows]) for c in range(cols)]

    def line(cells):
        return "  ".join(cells[c].ljust(width[c]) if c == 0 else cells[c].rjust(width[c])
                         for c in range(cols)).rstrip()

    out = [title, line(headers), "  ".join("-" * w for w in width)]
    out += [line(r) for r in rows]
    out += notes or []
    return "\n".join(out)
