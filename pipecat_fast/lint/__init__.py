"""Cache-bust linter: finds what keeps a prompt's prefix from being served from cache."""
