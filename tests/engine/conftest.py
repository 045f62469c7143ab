"""Every engine test runs on the compiled core (what the daemon runs) and on the reference engine
(the oracle in tests/reference): a rule the two disagree on fails here, by name."""
import pytest

from tests.engine import driver


@pytest.fixture(autouse=True, params=driver.ENGINES)
def engine(request):
    driver.engine = request.param
    yield request.param
    driver.engine = "core"
