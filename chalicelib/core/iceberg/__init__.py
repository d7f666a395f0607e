"""Iceberg metadata as the catalog holds it: reading, caching and writing metadata files, the
typed commands a change is made of (PyIceberg's updates and the catalog's own), the light path
that applies the commonest ones without PyIceberg, table definitions, view metadata, encryption
keys and the types PyIceberg cannot parse. It uses only primitives/ and the core's model."""
