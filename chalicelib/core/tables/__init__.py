"""Tables and views in domain terms, one module per operation (docs/design.md): listing (and its
projection), lookup, create, commit, adopt (metadata a client wrote), lifecycle (drop, rename),
rollback, multi-table transactions, the trash (undrop), views, Glue's entries, Hive tables and
renames, and side data. A table's pointer and how it settles are settling/'s, metadata files
iceberg/'s; faces reach these only through catalog/."""
