"""Server-side scan planning: scan filters (expressions), manifests (a bounded cache), content
files as the spec's JSON, read rules from policies, the planner, and plans kept in S3. It uses
iceberg/ (metadata files) and primitives/, beside access/ and never importing it."""
