"""Test fixture: plugins that break the registry's rules."""
