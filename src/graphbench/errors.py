"""The one error type the library raises; the CLI turns it into a one-line message and exit code 2."""


class GraphbenchError(Exception):
    """A user-facing error: bad input, missing file, unsupported model, impossible configuration."""
