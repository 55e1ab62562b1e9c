"""Shared fixtures: the published configs in ../shared/models (tests may read them)."""

from pathlib import Path

import pytest

SHARED_MODELS = Path(__file__).resolve().parents[2] / "shared" / "models"


@pytest.fixture(scope="session")
def shared_models() -> Path:
    if not SHARED_MODELS.is_dir():
        pytest.skip("../shared/models is not present")
    return SHARED_MODELS

