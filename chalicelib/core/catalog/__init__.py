"""The Catalog: the one way in to the core for every face (Iceberg REST, Glue, S3 Tables).

One module per area, each naming the operations a face may call: typed commands in
(`core/model.py`: identifiers, `NewTable`, `TableChange`), typed results or domain errors
(`chalicelib/errors.py`) out. Faces import nothing else of the core (tests/fast/test_architecture.py),
so pointer records, claims and storage keys stay below this line. Each area is its own module so
a function imports only the areas its routes use (cold starts)."""
