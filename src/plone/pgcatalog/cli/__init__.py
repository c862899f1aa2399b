"""Command-line entries (cron jobs, deployment steps)."""
