"""Capture ladders: which batch sizes get a CUDA graph, the padding they cause, and graph counts.

Pure Python: nothing here imports torch (matplotlib only inside plot_waste).
"""

from graphbench.ladders.ladder_comparison import (
    DEFAULT_BATCHES,
    LadderComparison,
    LadderSummary,
    PaddingRow,
    compare_ladders,
)
from graphbench.ladders.distributions import BatchSizeDistribution, load_distribution
from graphbench.ladders.graphs import graphs_per_mode, num_graphs, uniform_decode_sizes
from graphbench.ladders.padding import average_waste, eager_fraction, pad_to, padding_overhead, waste
from graphbench.ladders.plot import plot_waste
from graphbench.ladders.sizes import (
    BLACKWELL_TOP,
    DEFAULT_TOP,
    PERFORMANCE_MODES,
    Ladder,
    capture_sizes,
    default_max_capture_size,
    ladder_for_top,
)

__all__ = [
    "BLACKWELL_TOP",
    "DEFAULT_BATCHES",
    "DEFAULT_TOP",
    "PERFORMANCE_MODES",
    "BatchSizeDistribution",
    "Ladder",
    "LadderComparison",
    "LadderSummary",
    "PaddingRow",
    "average_waste",
    "capture_sizes",
    "compare_ladders",
    "default_max_capture_size",
    "eager_fraction",
    "graphs_per_mode",
    "ladder_for_top",
    "load_distribution",
    "num_graphs",
    "pad_to",
    "padding_overhead",
    "plot_waste",
    "uniform_decode_sizes",
    "waste",
]

# Ladder tuning (graphbench tune): exact DP over a batch-size distribution; numpy, no torch.
from graphbench.ladders.tune import ParetoPoint, TunedLadder, evaluate_ladder, knee, pareto_curve, tune_ladder  # noqa: E402
from graphbench.ladders.memory_model import MemoryModel, fit_memory_model  # noqa: E402
from graphbench.ladders.tune_sources import distribution_from_results, model_distribution  # noqa: E402

__all__ += [
    "MemoryModel",
    "ParetoPoint",
    "TunedLadder",
    "distribution_from_results",
    "evaluate_ladder",
    "fit_memory_model",
    "knee",
    "model_distribution",
    "pareto_curve",
    "tune_ladder",
]
