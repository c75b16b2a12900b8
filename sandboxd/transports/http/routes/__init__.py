"""Route modules of the HTTP API, one per area; each exposes ``router``."""
