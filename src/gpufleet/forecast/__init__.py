"""When will it run: admission-time forecasts for waiting workloads, from the twin and placement run
forward many times, and their calibration against what then happened (docs/forecast.md)."""
