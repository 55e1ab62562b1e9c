"""The weights of quantized checkpoints against the start-up logs' "Model loading took X GiB"
(../shared/calibration), record by record, per GPU."""

import pytest

from tests.quant_checkpoints import TOLERANCE, logged_weights_gib, predicted_weights, rebuilt_records

RECORDS = rebuilt_records() if (__import__("tests.quant_checkpoints").quant_checkpoints.SHARED / "models").is_dir() \
    else []


@pytest.mark.parametrize("entry", RECORDS, ids=lambda e: e.record)
def test_weights_match_the_log(entry):
    logged = logged_weights_gib()[entry.record] * (1 << 30)
    predicted = predicted_weights(entry)
    assert abs(predicted - logged) / logged <= TOLERANCE.get(entry.record, 0.01)
