"""Operators' commands: the ``pykbatch`` command line (argument parsing, printing, exit statuses).

The library never imports this package; each module here is one subcommand over the library's
functions (``main`` assembles them)."""
from pykbatch.commands.common import CANNOT_RUN, DAMAGED, EXIT_CODES, OK, UsageError  # noqa: F401
from pykbatch.commands.main import main, parser  # noqa: F401
