"""The AWS Glue face: JSON 1.1 over one POST route per warehouse, dispatched on X-Amz-Target."""
