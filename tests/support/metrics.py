"""Read a real /metrics scrape into {(sample name, frozenset(labels)): value}."""
from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def value(text: str, name: str, **labels: str) -> float:
    """One sample's value; 0 when the labelled series does not exist yet."""
    return samples(text).get((name, frozenset(labels.items())), 0.0)


def delta(before: str, after: str, name: str, **labels: str) -> float:
    """How much one sample moved between two scrapes."""
    return value(after, name, **labels) - value(before, name, **labels)
