"""Op family create (being written)."""
