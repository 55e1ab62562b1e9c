"""Print the quantized-checkpoint weights table (record, logged GiB, predicted GiB, error) for
the README: `python scripts/fits/quant_calibration.py`."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.quant_checkpoints import logged_weights_gib, predicted_weights, rebuilt_records  # noqa: E402

logged = logged_weights_gib()
print("| record | chip (tp) | rebuilt from | logged GiB | predicted GiB | error |")
print("|---|---|---|---:|---:|---:|")
for e in rebuilt_records():
    want = logged[e.record]
    got = predicted_weights(e) / (1 << 30)
    error = 100 * (got - want) / want
    print(f"| {e.record} | {e.chip} (tp {e.tp}) | {e.rebuilt} | {want:.2f} | {got:.3f} | {error:+.2f} % |")
