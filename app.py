"""All-in-one Chalice app (for `chalice local` and `chalice package`): every route group."""

from chalicelib.apps import ALL, build

app = build(ALL)
