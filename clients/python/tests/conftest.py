"""The live daemon the end-to-end tests read.

`cargo test -p ldpcov-cli --test python_client` (cli/tests/python_client.rs) builds the
wheel, installs it into a fresh virtual environment, starts `ldpcov-aggregator serve
--memory` with an admin token, creates and fills the collections, and runs these tests
with:

* ``LDPCOV_TEST_SERVER``: the daemon's ``http://127.0.0.1:PORT``;
* ``LDPCOV_TEST_ADMIN_TOKEN``: its admin token;
* ``LDPCOV_TEST_FIXTURE``: JSON of what each collection holds (the planted model);
* ``LDPCOV_AGGREGATOR_BIN``: the binary (the planner is compared with its ``plan``).

Without them the end-to-end tests FAIL: they never skip.
"""

from __future__ import annotations

import json
import os

import pytest

import ldpcov


def _need(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.fail(
            f"{name} is not set: the end-to-end tests run against a daemon the Rust test "
            "fills; run them with `cargo test -p ldpcov-cli --test python_client`",
            pytrace=False,
        )
    return value


@pytest.fixture(scope="session")
def server() -> str:
    return _need("LDPCOV_TEST_SERVER")


@pytest.fixture(scope="session")
def admin_token() -> str:
    return _need("LDPCOV_TEST_ADMIN_TOKEN")


@pytest.fixture(scope="session")
def fixture() -> dict:
    return json.loads(_need("LDPCOV_TEST_FIXTURE"))


@pytest.fixture(scope="session")
def aggregator_bin() -> str:
    return _need("LDPCOV_AGGREGATOR_BIN")


@pytest.fixture(scope="session")
def client(server: str, admin_token: str):
    with ldpcov.connect(server, token=admin_token, timeout=60) as c:
        yield c


@pytest.fixture(scope="session")
def survey(client) -> ldpcov.CovarianceEstimate:
    """The default estimate of the planted survey, with three principal components."""
    return client.estimate("survey", pca=3)
