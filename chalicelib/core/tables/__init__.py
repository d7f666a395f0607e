"""Table operations in domain terms, one module per protocol (docs/design.md): listing, lookup,
create, commit, adopt (metadata a client wrote) and lifecycle (drop, rename). Pointer states live
in core/settling/pointers.py, metadata files in core/iceberg/metadata.py; faces reach these through core/catalog.py."""
