"""torch.compile at startup: graphbench's own backend that splits at attention, and the disk cache."""
