"""Tuning capture ladders to traffic: a request trace replayed through the scheduler (trace_replay) and
the `graphbench tune` pipeline from its options to the tuned ladder (tune_run). No torch."""
