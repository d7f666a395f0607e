"""PySpark batch jobs against the catalog: session factory, ingest, maintenance, schedules."""
