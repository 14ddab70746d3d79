"""`make bench`: Mantle's figures measured side by side with what PostgreSQL allows
(docs/performance.md)."""
