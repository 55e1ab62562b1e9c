"""A service's traffic over the day: the forms a scenario gives it in (spec.py: an hourly
or weekly profile, a CSV trace, a Prometheus range export), the intervals they resolve to
(intervals.py), and the replicas each interval needs on a pool shape (schedule.py)."""
