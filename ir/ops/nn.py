"""Op family nn (being written)."""
