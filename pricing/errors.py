"""The one error type the user sees: bad input, named by its field, with the fix."""


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


def suggest(name: str, choices) -> str:
    """'did you mean X?' for the nearest of `choices` (difflib's close matches), or ''."""
    import difflib

    lowered = {str(c).lower(): str(c) for c in choices}
    near = difflib.get_close_matches(str(name).strip().lower(), list(lowered), n=3, cutoff=0.6)
    if not near:
        return ""
    return "did you mean " + " or ".join(repr(lowered[n]) for n in near) + "?"
