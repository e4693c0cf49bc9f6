"""`python -m graphbench` = the `graphbench` command."""

from graphbench.cli.main import main

main()
