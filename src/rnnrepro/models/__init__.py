"""Models built from the recurrent-unit library."""
