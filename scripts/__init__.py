"""Command-line tools (run them as files) whose helpers the tests and benches import."""
