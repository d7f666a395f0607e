"""Lambda handlers, one module per route group plus the all-in-one.

Importing any of them starts the init's warm-up first (chalicelib/warmup.py): what every request
needs is built while the handler's own modules import."""

from chalicelib import warmup

warmup.every_function()
