"""Fixtures of the integration tests: a real sealer for the whole session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .harness import Sealer, sealer


@pytest.fixture(scope="session")
def real_sealer() -> Iterator[Sealer]:
    with sealer() as s:
        yield s
