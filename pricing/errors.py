"""The one error type the user sees: bad input, named by its field, with the fix."""

from __future__ import annotations


class InputError(ValueError):
    """Bad input. `str(err)` is one line: the field, what is wrong, and how to fix it."""

    def __init__(self, field: str, problem: str, fix: str = ""):
        self.field = field
        self.problem = problem
        self.fix = fix
        message = f"{field}: {problem}"
        if fix:
            message += f" ({fix})"
        super().__init__(message)

    def __reduce__(self):  # picklable as its parts (a scenario's worker processes return verdicts holding one)
        return (type(self), (self.field, self.problem, self.fix))

    def named(self, name) -> str:
        """The line with its field as `name` calls it (`name`: field -> a flag or a file's path, or
        None to keep the field)."""
        return str(InputError(name(self.field) or self.field, self.problem, self.fix))


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
    """`line` with a quoted error's field as `name` calls it; any other line as it is."""
    if isinstance(line, Quoted) and name:
        return line.prefix + line.error.named(name) + line.suffix
    return str(line)


def suggest(name: str, choices) -> str:
    """'did you mean X?' for the nearest of `choices` (difflib's close matches), or ''."""
    import difflib

    lowered = {str(c).lower(): str(c) for c in choices}
    near = difflib.get_close_matches(str(name).strip().lower(), list(lowered), n=3, cutoff=0.6)
    if not near:
        return ""
    return "did you mean " + " or ".join(repr(lowered[n]) for n in near) + "?"
