"""The AWS S3 Tables face: botocore's `s3tables` rest-json API under /_s3tables."""
