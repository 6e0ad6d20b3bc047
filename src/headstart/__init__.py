"""headstart."""
