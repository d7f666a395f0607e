"""Lambda handlers, one module per route group plus the all-in-one."""
