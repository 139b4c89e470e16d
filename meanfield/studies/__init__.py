"""Limit studies and large deviations built on the particle and grid views."""
