"""frameworks."""
