"""GPU tests: skipped without CUDA. Run on the H200 with `pytest -m gpu`."""

import os

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_runtest_logreport(report):
    """With GRAPHBENCH_FAILURE_LOG set, each failure's report is appended to that file as it happens: a device
    call's time limit kills pytest before its summary, and the failures it had seen went with it."""
    path = os.environ.get("GRAPHBENCH_FAILURE_LOG")
    if path and report.failed:
        with open(path, "a") as f:
            f.write(f"{report.nodeid} ({report.when})\n{report.longreprtext}\n\n")
