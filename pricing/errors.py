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
