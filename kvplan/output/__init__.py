"""The only place human strings are made: tables, Markdown, CSV, JSON, charts and report pages."""
