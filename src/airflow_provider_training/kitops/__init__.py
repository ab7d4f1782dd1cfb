"""kitops."""
