"""What tables live in: warehouses (one S3 bucket each, their records and properties) and
namespaces (records, properties, listing, the create/delete races). It uses primitives/, iceberg/
and access/ (a warehouse's resource policies), and no table module."""
