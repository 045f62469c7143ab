"""The settings the reference engine consumes: the daemon's own config types (one definition)."""
from loopwarden_server.config.detection import DEFAULT_TOOL_CATALOG, LoopDetectionSettings, ToolCatalog

__all__ = ["DEFAULT_TOOL_CATALOG", "LoopDetectionSettings", "ToolCatalog"]
