"""The catalog's release: CHANGELOG.md's newest entry, answered in /v1/config (`catalog-version`)
and carried by `make release`'s file names."""

VERSION = "0.42.0"
