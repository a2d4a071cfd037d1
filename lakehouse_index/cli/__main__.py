"""``python -m lakehouse_index.cli``: the ``lakehouse-index`` command line."""

from lakehouse_index.cli.app import main

main()
