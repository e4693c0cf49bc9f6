"""Thin typer commands: parse, call one library function, render with rich."""
