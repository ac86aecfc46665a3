"""Fixtures of the planted-bug tests: each test takes a ``bug`` (``executed.PlantedBug``) parameter and the
``planted_binary`` fixture; the session's selected bugs are built in the background from the first
request on (``executed.PlantedBuilds``), several at a time, so that a test waits for its own build only.
Under pytest-xdist one worker runs them all (``tests/conftest.py``: ``TOGETHER``, by their names)."""
import pytest

from ..conftest import TOGETHER
from .executed import PlantedBug, PlantedBuilds


def _planted(item) -> bool:
    return isinstance(getattr(item, "callspec", None) and item.callspec.params.get("bug"), PlantedBug)


def pytest_collection_modifyitems(config, items):
    """Every planted-bug test is named so that pytest-xdist sends it with the others (``TOGETHER``)."""
    misnamed = [item.nodeid for item in items if _planted(item) and TOGETHER not in item.nodeid]
    if misnamed:
        raise pytest.UsageError(f"planted-bug tests must be named test_planted_* (tests/conftest.py): {misnamed}")


@pytest.fixture(scope="session")
def planted_builds(request, tmp_path_factory):
    """The planted bugs of the tests this session runs, queued in the order the tests run (a bug planted
    twice, such as a chip's control, is built once)."""
    bugs = [item.callspec.params["bug"] for item in request.session.items if _planted(item)]
    builds = PlantedBuilds(tmp_path_factory.mktemp("planted"), bugs)
    yield builds
    builds.close()


@pytest.fixture
def planted_binary(planted_builds, bug):
    """The test's ``bug`` built from its modified copy of the kernel sources."""
    return planted_builds.binary(bug)
