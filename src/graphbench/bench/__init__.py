"""Measurement: timing of engine steps and of peers, one benchmark point per process."""
