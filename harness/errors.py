"""Typed errors. Library code raises these; only the CLI turns them into exit code 2."""


class HarnessError(Exception):
    """A problem with the user's input or environment; the message names the problem and the fix."""


class UnknownNameError(HarnessError):
    """An adapter, suite or model name that no registry knows."""


class PluginError(HarnessError):
    """A registered adapter or suite that cannot be used: it fails to import or breaks the contract."""


class ConfigError(HarnessError):
    """A --set value or config field that fails validation."""


class DataError(HarnessError):
    """Dataset files missing or malformed."""


class ModelSourceError(HarnessError):
    """A model that cannot be resolved or loaded."""


class StoreError(HarnessError):
    """The results store cannot be read or written."""


class StoreBusyError(StoreError):
    """Another process holds the results database (DuckDB allows one writer); retry shortly."""
