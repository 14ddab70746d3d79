"""`make bench`: Mantle's figures measured side by side with what PostgreSQL allows (issue 5)."""
