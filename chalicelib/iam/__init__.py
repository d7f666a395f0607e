"""The AWS IAM face."""
