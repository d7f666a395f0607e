"""The domain core: catalog operations in domain terms, shared by every protocol face.

Its parts are packages, each using only the parts below it (docs/design.md, "The parts";
`.importlinter` declares the order): admin, catalog (the faces' one door), the sweeper, tables and
changes, settling, containers, access and planning, iceberg, primitives; model and paging are the
types the faces speak in."""
