"""Progress bars for the studies: :mod:`tqdm` when installed, silence otherwise.

tqdm is an install requirement of the package; where it is missing all
the same (an install without dependencies) only the bar goes, never a study.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

__all__ = ["progress"]

T = TypeVar("T")


def progress(items: Iterable[T], *, total: int | None = None, desc: str | None = None,
             enabled: bool = True) -> Iterator[T]:
    """Iterate over ``items``, showing a progress bar on stderr when possible.

    Parameters
    ----------
    items : iterable
        What to iterate over.
    total : int, optional
        Number of items, for iterables without ``len``.
    desc : str, optional
        Label shown before the bar.
    enabled : bool
        ``False`` iterates silently (tests, scripts).
    """
    if enabled:
        try:
            from tqdm.auto import tqdm
        except ImportError:
            pass
        else:
            yield from tqdm(items, total=total, desc=desc, leave=False, dynamic_ncols=True)
            return
    yield from items
