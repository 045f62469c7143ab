"""The differential suite: the compiled core held to the reference engine (tests/reference, the
oracle). Every tests/engine Run created by a test here is paired with the reference engine."""
import pytest

from tests.differential.pairing import ReferencePairing
from tests.engine import driver


@pytest.fixture(autouse=True)
def paired_with_the_reference():
    driver.pairing = ReferencePairing
    yield
    driver.pairing = None
