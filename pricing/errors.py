"""The one error type the user sees: bad input, named by its field, with the fix.

The library names fields (`isl`, `quantization`), never a command's flags: an error's text
mentions another field as `mention("isl")`, and whoever shows the error names each mention as its
reader wrote it (`err.named(name)`: the command line's flag, a scenario file's key)."""

from __future__ import annotations

import re

MENTION = re.compile("\x02([^\x03]*)\x03")  # a field named inside an error's text (control characters: no
# text a user writes or a file holds carries them)


def mention(field: str) -> str:
    """`field` named inside an error's problem or fix, to be shown as the reader calls it."""
    return f"\x02{field}\x03"


def render(text: str, name=None) -> str:
    """`text` with each mentioned field as `name` calls it (`name`: field -> its name, or None to
    keep the field)."""
    return MENTION.sub(lambda m: (name(m.group(1)) if name else None) or m.group(1), text)


class InputError(ValueError):
    """Bad input. `str(err)` is one line: the field, what is wrong, and how to fix it."""

    def __init__(self, field: str, problem: str, fix: str = ""):
        self.field = field
        self.text = problem, fix  # as written, with its mentions
        self.problem, self.fix = render(problem), render(fix)  # the mentions as the fields they name
        super().__init__(f"{field}: {self.problem}" + (f" ({self.fix})" if self.fix else ""))

    def __reduce__(self):  # picklable as its parts (a scenario's worker processes return verdicts holding one)
        return (type(self), (self.field, *self.text))

    @property
    def mentions(self) -> list[str]:
        """The fields the problem and the fix name, in order."""
        return [m.group(1) for text in self.text for m in MENTION.finditer(text)]

    def as_named(self, name) -> InputError:
        """This error with its field and its mentions as `name` calls them (`name`: field -> a flag
        or a file's key, or None to keep the field)."""
        problem, fix = self.text
        return InputError(name(self.field) or self.field, render(problem, name), render(fix, name))

    def named(self, name) -> str:
        """The line with its field and its mentions as `name` calls them."""
        return str(self.as_named(name))

    def parts(self, name) -> tuple[str, str]:
        """The problem and the fix with their mentions as `name` calls them."""
        return render(self.text[0], name), render(self.text[1], name)


class Quoted(str):
    """A line quoting an error between `prefix` and `suffix` (`h200 tp 2 dcp 1: <the error>`), kept
    with the error so that the report names its field as the reader wrote it (`quoted(line, name)`)."""

    def __new__(cls, prefix: str, error: InputError, suffix: str = ""):
        line = super().__new__(cls, prefix + str(error) + suffix)
        line.prefix, line.error, line.suffix = prefix, error, suffix
        return line

    def __getnewargs__(self):
        return self.prefix, self.error, self.suffix

    def within(self, prefix: str, suffix: str = "") -> Quoted:
        """This line quoted inside another."""
        return Quoted(prefix + self.prefix, self.error, self.suffix + suffix)


def quoted(line: str, name=None) -> str:
    """`line` with a quoted error's field, and each field it mentions, as `name` calls them."""
    if isinstance(line, Quoted) and name:
        return line.prefix + line.error.named(name) + line.suffix
    return render(str(line), name)


def suggest(name: str, choices) -> str:
    """'did you mean X?' for the nearest of `choices` (difflib's close matches), or ''."""
    import difflib

    lowered = {str(c).lower(): str(c) for c in choices}
    near = difflib.get_close_matches(str(name).strip().lower(), list(lowered), n=3, cutoff=0.6)
    if not near:
        return ""
    return "did you mean " + " or ".join(repr(lowered[n]) for n in near) + "?"


_NO_TEXT = frozenset((int, float, bool, type(None)))  # the types of values that hold no sentence


def named_all(obj, name=None):
    """`obj` (a report: a pydantic model, or a list, tuple or dict of them, or text) with every
    field its text mentions named as `name` calls it (None: the field), the same object where
    nothing changes. A report's sentences mention fields as errors do; the command that shows it
    names them (`plan` its flags, `plan scenario` the file's keys)."""
    kind = type(obj)
    if kind in _NO_TEXT:  # most of a report's values: looked at first, they cost least
        return obj
    if isinstance(obj, str):
        return quoted(obj, name) if "\x02" in obj else obj
    if kind in (list, tuple):
        out = [named_all(v, name) for v in obj]
        return obj if all(a is b for a, b in zip(out, obj, strict=True)) else kind(out)
    if isinstance(obj, dict):
        out = {k: named_all(v, name) for k, v in obj.items()}
        return obj if all(out[k] is v for k, v in obj.items()) else out
    fields = getattr(kind, "model_fields", None)
    if fields is None:
        return obj
    changed = {}
    for key in fields:
        value = getattr(obj, key)
        new = named_all(value, name)
        if new is not value:
            changed[key] = new
    return obj.model_copy(update=changed) if changed else obj
