"""Group coordinator and committed offsets tests."""
