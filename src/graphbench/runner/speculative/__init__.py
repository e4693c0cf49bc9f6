"""Speculative decoding without a second model: drafters (pure Python) and verification (torch)."""
