"""Allow ``python -m sanlab``."""

from sanlab.main import cli

cli()
