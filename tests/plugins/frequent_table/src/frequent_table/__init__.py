"""Example plugin for embedding-harness (see the README's "Adding a method as a plugin")."""
