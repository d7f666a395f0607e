"""Serverless Iceberg REST catalog whose only state is S3."""
