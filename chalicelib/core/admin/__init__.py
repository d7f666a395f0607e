"""The operator's tools on a warehouse's S3 state, run by scripts/catalog_admin.py: fsck (the
warehouse against the design's invariants; --repair does what the sweeper would), transfer (export
and import of a warehouse's catalog state) and relocate (table files copied with every path in their
metadata rewritten, which replication reuses). They use the core's primitives and its tables; no
route imports them."""
