"""The AWS STS face."""
