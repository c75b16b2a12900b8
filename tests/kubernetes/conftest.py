"""The kubernetes tier's fixtures: the cluster and the daemons on it are in
tests/kubernetes_fixtures.py (the conformance suite's kubernetes backend needs
them too); here only what this directory's tests name ``namespace`` (a
fresh cluster namespace per test), which would shadow the docker tier's
session-wide ``namespace`` anywhere else."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kubernetes.kube import Cluster
from tests.kubernetes_fixtures import drop_namespace, make_namespace


@pytest.fixture
def namespace(cluster: Cluster, tier_cleanup: None) -> Iterator[str]:
    name = make_namespace(cluster)
    try:
        yield name
    finally:
        drop_namespace(cluster, name)
