"""The suite's own pytest option: `--fuzz-scale N` tries N times the CI's cases in tests/test_fuzz_commands.py
(10: a deeper search than CI's)."""

FUZZ = {"scale": 1.0}


def pytest_addoption(parser):
    parser.addoption("--fuzz-scale", type=float, default=1.0,
                     help="tests/test_fuzz_commands.py: this many times the CI's cases (default 1)")


def pytest_configure(config):
    FUZZ["scale"] = config.getoption("--fuzz-scale")
