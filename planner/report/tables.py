"""Tables that fit the terminal they are printed to and never cut a number or a name.

    from planner.report.tables import Col, console_for_output, print_table

    cols = [Col("chip", "name"), Col("GPUs"), Col("nodes", drop=3), Col("binds", "text")]
    print_table(console_for_output(80), "title", cols, rows)          # rows: lists of str, one per column

A column is a `number` (right-aligned), a `name` (left-aligned) or `text` (wraps at spaces,
folds a longer word). Numbers and names are never wrapped nor cut: each column is as wide as its
widest cell. When the table does not fit the console's width, the columns with the highest
`drop` go first (0: never dropped), and a line under the table names what was left out and how
to see it (a wider terminal, `COLUMNS=200`, or `--format csv`). Text columns then wrap to what
is left. A table that does not fit even then is printed one row a block instead, every column
in it (`records=True`: a text column is never narrower than its longest word, so such a table goes to
blocks rather than wrap a word): its first cell as the heading, then each other column's header and
cell on a line of their own (the cell wrapping at spaces), a line under the title saying so, before
the blocks (a note after the last block reads as the next table's). `csv_text` writes
the same columns, every one, as CSV.

The console's width: the terminal's; `COLUMNS` when it is set (piped or not); else, piped or
redirected, planner/defaults.yaml report.pipe_width."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich import box as boxes
from rich.cells import cell_len
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

Kind = Literal["number", "name", "text"]


@dataclass(frozen=True)
class Col:
    """One column: its header, what its cells are, and how soon it is dropped (0: never;
    the highest first)."""

    header: str
    kind: Kind = "number"
    drop: int = 0
    justify: Literal["left", "right", "center"] | None = None

    @property
    def align(self) -> str:
        return self.justify or ("right" if self.kind == "number" else "left")


def console_for_output(pipe_width: int, *, stderr: bool = False) -> Console:
    """A console as wide as the terminal, or `COLUMNS`, or (piped, no COLUMNS) `pipe_width`, the width
    of output that goes to a pipe or a file (planner/defaults.yaml report.pipe_width, as the command
    read it)."""
    probe = Console(stderr=stderr)
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        width = int(columns)
    elif probe.is_terminal:
        width = None
    else:
        width = int(pipe_width)
    return Console(highlight=False, width=width, stderr=stderr)


def unwrapped(console: Console) -> bool:
    """Whether prose prints as one line per sentence: where no terminal shows it (a pipe, a file: a
    reader's tools see whole lines). On a terminal rich wraps it at the terminal's width, at spaces,
    so that the terminal never breaks a word."""
    return not console.is_terminal


def _widest(column: Col, cells: list[str]) -> int:
    """The narrowest a column may be: a number's or a name's widest cell, a text's longest word;
    and its header's longest line (a header may hold a newline; it never wraps elsewhere)."""
    header = max((cell_len(line) for line in column.header.splitlines()), default=0)
    if column.kind == "text":
        return max([header] + [cell_len(w) for c in cells for w in c.split()])
    return max([header] + [cell_len(line) for c in cells for line in c.splitlines()])


def _table(title: str | None, columns: Sequence[Col], rows: Sequence[Sequence[str]], keep: list[int],
           box, caption: str | None, whole_words: bool = False, title_justify: str = "left") -> Table:
    table = Table(box=box, title=Text(title) if title else None, caption=Text(caption) if caption else None,
                  title_justify=title_justify, caption_justify="left")
    for i in keep:
        c = columns[i]
        widest = _widest(c, [str(r[i]) for r in rows])
        if c.kind == "text":
            table.add_column(Text(c.header), justify=c.align, overflow="fold",
                             min_width=widest if whole_words else min(widest, 12))
        else:
            table.add_column(Text(c.header), justify=c.align, no_wrap=True, min_width=widest, overflow="fold")
    for r in rows:
        table.add_row(*(Text(str(r[i])) for i in keep))
    return table


def width_needed(table: Table) -> int:
    """The narrowest the table can be without cutting a number or a name: every column's
    min_width and padding, and the box's separators."""
    padding = sum(table._get_padding_width(i) for i in range(len(table.columns)))
    return sum(c.min_width or 0 for c in table.columns) + padding + table._extra_width


def fit(title: str | None, columns: Sequence[Col], rows: Sequence[Sequence[str]], width: int, *,
        box=boxes.SIMPLE_HEAD, caption: str | None = None, whole_words: bool = False,
        title_justify: str = "left") -> tuple[Table, list[str]]:
    """The table at `width`, and the headers of the columns dropped to fit it (none when it fits);
    `whole_words`: a text column is never narrower than its longest word."""
    keep = list(range(len(columns)))
    while True:
        table = _table(title, columns, rows, keep, box, caption, whole_words, title_justify)
        droppable = [i for i in keep if columns[i].drop > 0]
        if width_needed(table) <= width or not droppable:
            return table, [" ".join(c.header.split()) for i, c in enumerate(columns) if i not in keep]
        keep.remove(max(droppable, key=lambda i: (columns[i].drop, i)))


def record_blocks(columns: Sequence[Col], rows: Sequence[Sequence[str]], width: int | None = None) -> Group:
    """Every row a block: the first header and its cell as the heading ('group 0'; the cell alone
    when it starts with the header, 'stage 0 of 2'), then each other column's header and cell (an
    empty cell left out), the cell wrapping at spaces (a word longer than the line folds). When a
    header and a number or name beside it would not fit `width`, each cell goes on a line of its
    own under its header, indented, so that no number or name is folded."""
    headers = ["  " + " ".join(c.header.split()) for c in columns[1:]]
    label = max(map(cell_len, headers))
    widest = max((cell_len(str(r[i])) for r in rows for i, c in enumerate(columns) if i and c.kind != "text"),
                 default=0)
    stacked = width is not None and label + 2 + widest > width
    blocks = []
    for r in rows:
        block = Table.grid(padding=(0, 2, 0, 0))
        if stacked:
            block.add_column(overflow="fold")
            for header, cell in zip(headers, r[1:], strict=True):
                if str(cell):
                    block.add_row(Text(header))
                    block.add_row(Text("    " + str(cell)))
        else:
            block.add_column(no_wrap=True, min_width=label)
            block.add_column(overflow="fold")
            for header, cell in zip(headers, r[1:], strict=True):
                if str(cell):
                    block.add_row(Text(header), Text(str(cell)))
        first = " ".join(columns[0].header.split())
        heading = str(r[0]) if not first or str(r[0]).startswith(first) else f"{first} {r[0]}"
        blocks += [Text(heading), block]
    return Group(*blocks)


def print_table(console: Console, title: str | None, columns: Sequence[Col], rows: Sequence[Sequence[str]], *,
                box=boxes.SIMPLE_HEAD, caption: str | None = None, csv_hint: bool = False,
                records: bool = False, title_justify: str = "left") -> list[str]:
    """Print the fitted table, and under it what was left out; returns the dropped headers. A table
    too wide for the console even so is printed one row a block instead (and returns none).
    `csv_hint`: the command printing it takes `--format csv` (the note under the table says so)."""
    table, dropped = fit(title, columns, rows, console.width, box=box, caption=caption, whole_words=records,
                         title_justify=title_justify)
    if width_needed(table) > console.width:  # even its kept columns do not fit: never cut one
        if title:
            console.print(title, markup=False, highlight=False)
        unit = " ".join(columns[0].header.split()) or "row"
        console.print(f"(one {unit} a block: the table takes "
                      f"{width_needed(table)} columns, not {console.width}; widen the terminal or set COLUMNS to "
                      "see it as a table)", markup=False, highlight=False)  # under its title, before its blocks
        console.print(record_blocks(columns, rows, console.width))
        return []
    console.print(table)
    if dropped:
        more = " or `--format csv`" if csv_hint else ""
        console.print(f"(not shown at {console.width} columns: {', '.join(dropped)}; widen the terminal, set "
                      f"COLUMNS{more} to see every column)", markup=False, highlight=False)
    return dropped


def csv_text(columns: Sequence[Col], rows: Sequence[Sequence[str]]) -> str:
    """Every column as CSV, a header row first; numbers without thousands separators."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([" ".join(c.header.split()) for c in columns])
    for r in rows:  # a number without its thousands separators, as a spreadsheet reads it
        writer.writerow([str(v).replace(",", "") if c.kind == "number" else str(v) for c, v in zip(columns, r,
                                                                                                   strict=True)])
    return out.getvalue()
