"""The step-time model: how long one engine step takes on one rank, priced from the
same model graph and resolved deployment the memory kernel sizes, and the serving figures a plan
reports from it (time per output token, time to first token, throughput)."""

from pricing.step.rates import ChipRates, Efficiency, chip_rates, has_rates, missing_rates
from pricing.step.step import Step, StepModel, StepTime

__all__ = ["ChipRates", "Efficiency", "Step", "StepModel", "StepTime", "chip_rates", "has_rates", "missing_rates"]
