"""What makes two configs of a training cell the same cell: every resolved value but where and how wide it
runs. A leaf module (it imports nothing of the package): the grid, the records and the run files compare
configs with it."""

# config.json keys that say where a cell ran, not what it computed
RUNTIME_KEYS = ("device", "threads")


def _flat(value, prefix: str = "") -> dict:
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _flat(item, f"{prefix}{key}.").items()}
    return {prefix.rstrip("."): value}


def config_differences(recorded: dict, expected: dict) -> list[str]:
    """How a cell's config.json differs from what the study file resolves now (runtime keys aside)."""
    old = {k: v for k, v in _flat(recorded).items() if k not in RUNTIME_KEYS}
    new = _flat(expected)
    return [f"{key} {old.get(key, '(none)')!r} -> {new.get(key, '(none)')!r}"
            for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)]
