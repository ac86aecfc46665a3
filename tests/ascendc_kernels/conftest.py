"""Fixtures of the planted-bug tests: each test takes a ``bug`` (``executed.PlantedBug``) parameter and the
``planted_binary`` fixture; the session's selected bugs are built in the background from the first
request on (``executed.PlantedBuilds``), several at a time, so that a test waits for its own build only.
Under pytest-xdist they are one ``xdist_group``, run by one worker (``tests/conftest.py``)."""
import pytest

from .executed import PlantedBug, PlantedBuilds


def _planted(item) -> bool:
    return isinstance(getattr(item, "callspec", None) and item.callspec.params.get("bug"), PlantedBug)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """The planted-bug tests are the ``xdist_group`` "planted": every process that runs one builds the
    binaries of all the session's planted bugs (:func:`planted_builds`), so one process runs them all."""
    for item in items:
        if _planted(item):
            item.add_marker(pytest.mark.xdist_group("planted"))


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
