"""The installed package carries its data files (the registry, the model cards, the planner's
defaults): every YAML file under a package matches a package-data pattern of pyproject.toml."""

import fnmatch
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[1]


def test_every_data_file_is_packaged():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]
    for package in ("pricing", "planner"):
        for path in (ROOT / package).rglob("*.yaml"):
            relative = path.relative_to(ROOT / package).as_posix()
            assert any(fnmatch.fnmatch(relative, p) for p in patterns.get(package, [])), relative
