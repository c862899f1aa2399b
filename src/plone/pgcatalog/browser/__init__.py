"""Browser views: Site Setup's control panel and the page shown when PostgreSQL
cannot be reached."""
