"""``python -m chaos SUBCOMMAND ...``: the subcommands are ``chaos.cli.SUBCOMMANDS``
(``run``: a chaos run, ``check``: the history checker)."""

from __future__ import annotations

import sys

from chaos.cli import main

if __name__ == "__main__":
    sys.exit(main())
