"""The installed package carries its data files (the registry, its chip files, the model cards,
the planner's defaults): every YAML file under a package is matched by a package-data pattern of
pyproject.toml, read as setuptools reads it (a glob: `*` does not cross a `/`)."""

from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[1]


def packaged(package: str, patterns: list[str]) -> set[Path]:
    return {path for pattern in patterns for path in (ROOT / package).glob(pattern)}


def test_every_data_file_is_packaged():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]
    for package in ("pricing", "planner"):
        files = packaged(package, patterns.get(package, []))
        data = [p for suffix in ("*.yaml", "*.html.j2") for p in (ROOT / package).rglob(suffix)]  # + html templates
        missing = sorted(p.relative_to(ROOT).as_posix() for p in data if p not in files)
        assert not missing, f"not in the wheel: {missing}"


def test_a_pattern_does_not_reach_into_subfolders():
    """The reading above is setuptools': `registry/*.yaml` leaves `registry/chips/` out."""
    shallow = packaged("pricing", ["registry/*.yaml"])
    assert shallow and not any(p.parent.name == "chips" for p in shallow)
