"""Authentication (SigV4, bearer tokens) and IAM-style authorization, with identities kept in S3."""
