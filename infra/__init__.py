"""Development tooling the tests and benches import: the Lambda emulator, an S3 in memory."""
