"""Config file (JSON5) -> frozen, validated, resolved settings; see spec section 2."""
from loopwarden_server.config.loader import (
    ConfigError,
    ConfigErrors,
    default_config_text,
    load_config_bytes,
    load_config_file,
    load_config_text,
    load_default_config,
)
from loopwarden_server.config.model import Config

__all__ = [
    "Config",
    "ConfigError",
    "ConfigErrors",
    "default_config_text",
    "load_config_bytes",
    "load_config_file",
    "load_config_text",
    "load_default_config",
]
