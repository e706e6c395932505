"""Robustness against hostile and broken clients: replayed and mutated real traffic,
connection floods and stalls, a full disk."""
