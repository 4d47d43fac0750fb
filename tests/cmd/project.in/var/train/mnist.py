"""Stands in for a training program: the fixture only builds its image."""
print("training")
