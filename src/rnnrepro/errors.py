"""The error every check of the run config, the study files and a config file's cells raises.

It lives apart from :mod:`rnnrepro.configuration` so that the modules that configuration builds on
(:mod:`rnnrepro.custom_cells`) can raise it without importing configuration back.
"""


class ConfigError(ValueError):
    """A config or study file is malformed; the message says which key and what to do."""
