"""Op family manipulate (being written)."""
