"""End-to-end test of the Python bindings (ldpcov_ffi) against a real aggregator.

Run it with ``bindings/python/run_tests.sh``, which builds the library, generates the
``ldpcov_ffi`` module and sets:

* ``LDPCOV_PY_MODULE_DIR`` -- the directory holding ``ldpcov_ffi.py`` and the library,
  or empty: the package installed from the wheel (``build_wheel.py``) into the running
  interpreter's environment, which ``LDPCOV_PY_FROM_WHEEL=1`` then checks;
* ``LDPCOV_URL`` -- an aggregator to use, or else
* ``LDPCOV_AGGREGATOR_BIN`` -- the daemon binary, started here as
  ``serve --memory --listen 127.0.0.1:0`` (its address is read from its log).

Plain ``unittest``: no third-party test runner. numpy is used when importable.
"""

import json
import math
import os
import random
import re
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

if os.environ.get("LDPCOV_PY_MODULE_DIR"):
    sys.path.insert(0, os.environ["LDPCOV_PY_MODULE_DIR"])

import ldpcov_ffi as ldp  # noqa: E402  (after the path is set)

try:
    import numpy as np
except ImportError:  # the numpy check is skipped, visibly
    np = None

# Every collection of the test: ε = 1 per report at δ = 1e-6, as a real survey might ask.
EPSILON = 1.0
DELTA = 1e-6
# Reports the main collection receives from Python.
N_REPORTS = 300
DIM = 4
# The shuffled collection's batch window: the relay forms no batch from a window younger
# than this (the aggregator's default is an hour).
SHUFFLE_WINDOW_SECONDS = 1
# How long the relay may take to forward a full window to the aggregator.
RELAY_TIMEOUT_SECONDS = 30

ANSI = re.compile(r"\x1b\[[0-9;]*m")

# The shared test vectors: every client reproduces the Rust client's bytes.
VECTORS = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "testing", "vectors", "reports-v1.json"
)


class Daemon:
    """A real ``ldpcov-aggregator serve --memory`` on a free loopback port."""

    def __init__(self, binary):
        self.log = []
        self.proc = subprocess.Popen(
            [binary, "serve", "--memory", "--listen", "127.0.0.1:0", "--log", "info"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        found = threading.Event()
        self.url = None

        def read():
            for line in self.proc.stderr:
                line = ANSI.sub("", line)
                self.log.append(line)
                match = re.search(r"addr=(\S+)", line)
                if self.url is None and "ldpcov aggregator listening" in line and match:
                    self.url = "http://" + match.group(1)
                    found.set()

        threading.Thread(target=read, daemon=True).start()
        if not found.wait(30):
            self.stop()
            raise RuntimeError("daemon did not announce its address:\n" + "".join(self.log))

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def spec(collection_id, dim, min_reports):
    return ldp.CollectionSpecInput(
        collection_id=collection_id,
        dim=dim,
        epsilon=EPSILON,
        delta=DELTA,
        clip_radius=3.0,
        min_reports=min_reports,
    )


class BindingsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = None
        url = os.environ.get("LDPCOV_URL")
        if not url:
            cls.daemon = Daemon(os.environ["LDPCOV_AGGREGATOR_BIN"])
            url = cls.daemon.url
        cls.url = url
        cls.admin = ldp.Admin.connect(url)

        # The main collection: N_REPORTS reports from Python through the Device API (a
        # device without a ledger stands in for a fleet of devices here).
        cls.info = cls.admin.create_collection(spec("py-e2e", DIM, 100))
        cls.before = cls.admin.status("py-e2e").reports
        device = ldp.Device.connect(url)
        cls.sampler = device.noise_sampler_kind()
        cls.device_info = device.collection("py-e2e")
        rng = random.Random(20240601)
        cls.results = [
            device.submit("py-e2e", [rng.gauss(0.0, 1.0) for _ in range(DIM)])
            for _ in range(N_REPORTS)
        ]
        cls.after = cls.admin.status("py-e2e").reports

    @classmethod
    def tearDownClass(cls):
        if cls.daemon is not None:
            cls.daemon.stop()

    def test_device_uses_the_exact_sampler_and_rederived_parameters(self):
        self.assertEqual(self.sampler, "exact-discrete-gaussian")
        # Both sides re-derive the parameters from the same spec.
        self.assertEqual(self.device_info, self.info)
        self.assertEqual(self.info.dim, DIM)
        self.assertEqual(self.info.encoding, ldp.WireEncoding.I32)
        self.assertGreater(self.info.sigma, 0.0)

    def test_count_moved_by_exactly_the_reports_sent(self):
        self.assertEqual(self.before, 0)
        self.assertEqual(self.after - self.before, N_REPORTS)
        ids = {r.report_id for r in self.results}
        self.assertEqual(len(ids), N_REPORTS, "report ids must be fresh")
        self.assertTrue(all(len(i) == 32 for i in ids))
        self.assertFalse(any(r.duplicate for r in self.results))

    def test_estimate_comes_from_the_daemon(self):
        est = self.admin.estimate("py-e2e")
        self.assertEqual(est.collection_id, "py-e2e")
        self.assertEqual(est.reports, N_REPORTS)
        self.assertEqual(est.dim, DIM)
        self.assertEqual(len(est.upper_triangle), DIM * (DIM + 1) // 2)
        self.assertEqual(len(est.matrix), DIM * DIM)
        self.assertTrue(est.psd_projected)
        # The full matrix is the packed triangle mirrored: row-major i <= j.
        k = 0
        for i in range(DIM):
            for j in range(i, DIM):
                self.assertEqual(est.matrix[i * DIM + j], est.upper_triangle[k])
                self.assertEqual(est.matrix[j * DIM + i], est.upper_triangle[k])
                k += 1

    def test_estimate_into_numpy(self):
        if np is None:
            self.skipTest("numpy is not installed")
        est = self.admin.estimate("py-e2e")
        cov = np.array(est.matrix).reshape(est.dim, est.dim)
        np.testing.assert_array_equal(cov, cov.T)
        np.testing.assert_array_equal(cov[np.triu_indices(est.dim)], est.upper_triangle)
        # Released matrices are projected onto the PSD cone (eigenvalues >= 0, up to
        # the rounding of an eigendecomposition of a 4 x 4 matrix).
        self.assertGreaterEqual(np.linalg.eigvalsh(cov).min(), -1e-9 * max(1.0, abs(cov).max()))

    def test_estimate_below_minimum_is_refused(self):
        self.admin.create_collection(spec("py-few", 2, 1000))
        with self.assertRaises(ldp.LdpcovError.FailedPrecondition):
            self.admin.estimate("py-few")

    def test_bad_input_raises_typed_errors_and_counts_nothing(self):
        self.admin.create_collection(spec("py-bad", 3, 1))
        with tempfile.TemporaryDirectory() as ledger_dir:
            device = ldp.Device.connect(self.url, ledger=ldp.LedgerConfig(dir=ledger_dir))
            for x in ([1.0, 2.0], [1.0, 2.0, 3.0, 4.0], [1.0, math.nan, 0.0], [math.inf, 0.0, 0.0]):
                with self.assertRaises(ldp.LdpcovError.InvalidInput, msg=repr(x)):
                    device.submit("py-bad", x)
            # Refused before the ledger was charged.
            self.assertEqual(device.spent_epsilon(), 0.0)
            self.assertEqual(self.admin.status("py-bad").reports, 0)
            with self.assertRaises(ldp.LdpcovError.NotFound):
                device.submit("py-no-such-collection", [0.0, 0.0, 0.0])
            # The count is live: one good report moves it by one.
            device.submit("py-bad", [0.5, -0.5, 1.0])
            self.assertEqual(self.admin.status("py-bad").reports, 1)

    def test_privacy_policy_refuses_weaker_collections(self):
        self.admin.create_collection(spec("py-policy", 2, 1))
        strict = ldp.PolicyConfig(max_epsilon=EPSILON / 2, max_delta=DELTA)
        device = ldp.Device.connect(self.url, policy=strict)
        with self.assertRaises(ldp.LdpcovError.PolicyRefused):
            device.submit("py-policy", [0.1, 0.2])
        self.assertEqual(self.admin.status("py-policy").reports, 0)

    def test_ledger_refuses_past_the_budget(self):
        info = self.admin.create_collection(spec("py-ledger", 3, 1))
        # The ledger adds up zCDP rho and states budgets as epsilon at delta through
        # rho-zCDP => (rho + 2 sqrt(rho ln(1/delta)), delta)-DP (Bun & Steinke 2016,
        # Proposition 1.3). A lifetime budget of 2.5 reports' rho therefore admits
        # exactly 2 reports (2 rho <= 2.5 rho < 3 rho): the margin of half a report is
        # far above the rounding of the conversion and its inverse.
        rho_budget = 2.5 * info.rho
        budget = rho_budget + 2.0 * math.sqrt(rho_budget * math.log(1.0 / DELTA))
        with tempfile.TemporaryDirectory() as ledger_dir:
            config = ldp.LedgerConfig(
                dir=ledger_dir, lifetime_epsilon=budget, period_days=0, delta=DELTA
            )
            device = ldp.Device.connect(self.url, ledger=config)
            device.submit("py-ledger", [1.0, 0.0, -1.0])
            device.submit("py-ledger", [0.0, 2.0, 0.5])
            with self.assertRaises(ldp.LdpcovError.BudgetExceeded):
                device.submit("py-ledger", [0.3, 0.3, 0.3])
            self.assertEqual(self.admin.status("py-ledger").reports, 2)
            spent = device.spent_epsilon()
            two = 2.0 * info.rho
            self.assertAlmostEqual(spent, two + 2.0 * math.sqrt(two * math.log(1.0 / DELTA)))
            del device
            # The spend is on disk: a new device over the same directory refuses too.
            again = ldp.Device.connect(self.url, ledger=config)
            with self.assertRaises(ldp.LdpcovError.BudgetExceeded):
                again.submit("py-ledger", [0.3, 0.3, 0.3])
            self.assertEqual(self.admin.status("py-ledger").reports, 2)

    def test_the_mechanism_is_chosen_at_create_and_rank_one_reports_count(self):
        # The default of a new collection is the svec-weighted Gaussian report.
        self.assertEqual(self.info.mechanism, ldp.Mechanism.GAUSSIAN)
        rank_one = ldp.CollectionSpecInput(
            collection_id="py-rank-one",
            dim=DIM,
            epsilon=2.0,
            delta=0.0,
            clip_radius=3.0,
            min_reports=50,
            mechanism=ldp.Mechanism.RANK_ONE,
        )
        info = self.admin.create_collection(rank_one)
        self.assertEqual(info.mechanism, ldp.Mechanism.RANK_ONE)
        self.assertEqual(info.encoding, ldp.WireEncoding.I16)
        self.assertEqual((info.delta, info.sigma), (0.0, 0.0))
        # Pure epsilon implies epsilon^2/2-zCDP: what a ledger adds up.
        self.assertAlmostEqual(info.rho, 2.0 ** 2 / 2)
        device = ldp.Device.connect(self.url)
        self.assertEqual(device.collection("py-rank-one"), info)
        rng = random.Random(7)
        for _ in range(60):
            device.submit("py-rank-one", [rng.gauss(0.0, 1.0) for _ in range(DIM)])
        self.assertEqual(self.admin.status("py-rank-one").reports, 60)
        est = self.admin.estimate("py-rank-one")
        self.assertEqual(est.reports, 60)
        self.assertTrue(all(math.isfinite(v) for v in est.upper_triangle))
        # A rank-one collection with a delta is refused, and nothing is created.
        with self.assertRaises(ldp.LdpcovError.InvalidInput):
            self.admin.create_collection(
                ldp.CollectionSpecInput(
                    collection_id="py-rank-one-delta",
                    dim=DIM,
                    epsilon=2.0,
                    delta=1e-6,
                    clip_radius=3.0,
                    min_reports=1,
                    mechanism=ldp.Mechanism.RANK_ONE,
                )
            )
        with self.assertRaises(ldp.LdpcovError.NotFound):
            self.admin.status("py-rank-one-delta")


    def test_shuffled_collection_goes_sealed_through_the_relay(self):
        # The relay of cargo test's harness (bindings/tests/languages/common/relay.rs):
        # the real ldpcov-relay, in process, in front of the aggregator. It takes one
        # report per device token (LDPCOV_RELAY_DEVICE_TOKENS: one per report here) and,
        # on its next batch check, forwards a window as one shuffled batch once the
        # window is the collection's batch window old and holds the collection's
        # minimum (never fewer than LDPCOV_RELAY_MIN_BATCH, its floor). Run by hand,
        # there is no relay.
        relay_url = os.environ.get("LDPCOV_RELAY_URL")
        if not relay_url:
            self.skipTest("no relay (LDPCOV_RELAY_URL): run through cargo test -p ldpcov-ffi")
        batch = int(os.environ["LDPCOV_RELAY_MIN_BATCH"])
        tokens = os.environ["LDPCOV_RELAY_DEVICE_TOKENS"].split(",")
        self.assertGreaterEqual(len(tokens), batch, "one device token per report")
        epsilon = 2.0
        info = self.admin.create_collection(
            ldp.CollectionSpecInput(
                collection_id="py-shuffled",
                dim=3,
                epsilon=epsilon,
                delta=0.0,
                clip_radius=1.0,
                min_reports=1,
                mechanism=ldp.Mechanism.RANK_ONE,
                shuffle_min_batch_size=batch,
                shuffle_batch_window_seconds=SHUFFLE_WINDOW_SECONDS,
            )
        )
        self.assertTrue(info.shuffled)
        self.assertFalse(self.info.shuffled)
        rng = random.Random(33)
        x = lambda: [rng.uniform(-0.5, 0.5) for _ in range(3)]  # noqa: E731
        with tempfile.TemporaryDirectory() as ledgers:

            def ledger(name):
                """A ledger of its own for one device (a phone has one)."""
                path = os.path.join(ledgers, name)
                os.mkdir(path)
                return ldp.LedgerConfig(
                    dir=path, lifetime_epsilon=1000.0, period_days=0, delta=DELTA
                )

            # Without a relay the device refuses before charging anything.
            direct = ldp.Device.connect(self.url, ledger=ledger("direct"))
            with self.assertRaises(ldp.LdpcovError.Sealing) as refused:
                direct.submit("py-shuffled", x())
            self.assertIn("relay", str(refused.exception))
            self.assertEqual(direct.spent_epsilon(), 0.0)
            del direct

            # One device per report, each with its own device token and ledger: the
            # relay takes one report per device and collection. Their aggregator
            # address is a canary: a device of a shuffled collection asks the relay
            # alone, so the aggregator never learns which device reports or when.
            canary = Canary()
            devices = [
                ldp.Device.connect(
                    canary.url,
                    ledger=ledger(f"device-{i}"),
                    relay=ldp.RelayConfig(url=relay_url, token=tokens[i]),
                )
                for i in range(batch)
            ]
            self.assertEqual(devices[0].collection("py-shuffled"), info)
            for device in devices[:-1]:
                self.assertFalse(device.submit("py-shuffled", x()).duplicate)
            # The relay holds them: past the window it waits for the minimum, so the
            # aggregator has seen nothing yet.
            time.sleep(SHUFFLE_WINDOW_SECONDS + 1.0)
            self.assertEqual(self.admin.status("py-shuffled").reports, 0)
            self.assertFalse(devices[-1].submit("py-shuffled", x()).duplicate)
            # The relay forwards the batch on its next check, not within the call:
            # the aggregator opens and counts every sealed report.
            counted = wait_for_count(self.admin, "py-shuffled", batch, RELAY_TIMEOUT_SECONDS)
            self.assertEqual(
                counted,
                batch,
                f"the aggregator counts {counted} of the {batch} reports the relay took "
                f"after {RELAY_TIMEOUT_SECONDS} s: the relay did not forward them as one batch",
            )
            # Each device spent epsilon0 once (rho = epsilon0^2 / 2), as a direct
            # report would.
            rho = epsilon**2 / 2
            for device in devices:
                self.assertAlmostEqual(
                    device.spent_epsilon(), rho + 2.0 * math.sqrt(rho * math.log(1.0 / DELTA))
                )
            del device, devices
        # A device token the relay does not know: refused, nothing counted.
        stranger = ldp.Device.connect(
            canary.url, relay=ldp.RelayConfig(url=relay_url, token="wrong")
        )
        with self.assertRaises(ldp.LdpcovError.Unauthorized):
            stranger.submit("py-shuffled", x())
        self.assertEqual(self.admin.status("py-shuffled").reports, batch)
        self.assertEqual(
            canary.connections,
            0,
            "a device of a shuffled collection connected to the aggregator address it was given",
        )
        canary.close()
        print(
            f"shuffled: {batch} sealed reports counted through the relay, one per device",
            file=sys.stderr,
        )

    def test_two_aggregator_collection_through_leader_and_helper(self):
        # cargo test's harness serves LDPCOV_URL as the leader of a second in-process
        # aggregator, the helper at LDPCOV_HELPER_URL (bindings/tests/languages/common).
        # Run by hand, there is no helper.
        helper_url = os.environ.get("LDPCOV_HELPER_URL")
        if not helper_url:
            self.skipTest("no helper (LDPCOV_HELPER_URL): run through cargo test -p ldpcov-ffi")
        n = 12
        two = ldp.CollectionSpecInput(
            collection_id="py-two",
            dim=3,
            epsilon=EPSILON,
            delta=DELTA,
            clip_radius=1.0,
            min_reports=n,
            two_aggregator=True,
        )
        helper = ldp.Admin.connect(helper_url)
        # The leader refuses a collection its helper does not hold yet.
        with self.assertRaises(ldp.LdpcovError.FailedPrecondition):
            self.admin.create_collection(two)
        helper.create_collection(two)
        info = self.admin.create_collection(two)
        self.assertTrue(info.two_aggregator)
        self.assertFalse(info.shuffled)
        self.assertFalse(self.info.two_aggregator)
        rng = random.Random(54)
        x = lambda: [rng.uniform(-0.5, 0.5) for _ in range(3)]  # noqa: E731
        with tempfile.TemporaryDirectory() as ledger_dir:
            ledger = ldp.LedgerConfig(
                dir=ledger_dir, lifetime_epsilon=1000.0, period_days=0, delta=DELTA
            )
            # Without a helper the device refuses before charging anything: it seals
            # the helper's share only to a key the helper itself publishes.
            alone = ldp.Device.connect(self.url, ledger=ledger)
            with self.assertRaises(ldp.LdpcovError.TwoAggregator) as refused:
                alone.submit("py-two", x())
            self.assertIn("helper", str(refused.exception))
            self.assertEqual(alone.spent_epsilon(), 0.0)
            del alone

            device = ldp.Device.connect(
                self.url, ledger=ledger, helper=ldp.HelperConfig(url=helper_url)
            )
            self.assertEqual(device.collection("py-two"), info)
            for _ in range(n):
                self.assertFalse(device.submit("py-two", x()).duplicate)
            # Each report is charged the collection's rho once, as ε at the ledger's δ.
            self.assertAlmostEqual(
                device.spent_epsilon(),
                n * info.rho + 2.0 * math.sqrt(n * info.rho * math.log(1.0 / DELTA)),
            )
            del device
        # The leader verifies its queue with the helper in the background: both count
        # every valid report once.
        self.assertEqual(wait_for_count(self.admin, "py-two", n, RELAY_TIMEOUT_SECONDS), n)
        self.assertEqual(helper.status("py-two").reports, n)
        # The estimate is a release of a stated rho from each aggregator's budget.
        with self.assertRaises(ldp.LdpcovError.InvalidInput):
            self.admin.estimate("py-two")
        estimate = self.admin.estimate("py-two", release_rho=info.rho / 2)
        self.assertEqual((estimate.reports, estimate.dim), (n, 3))
        self.assertEqual(len(estimate.matrix), 9)
        self.assertTrue(all(math.isfinite(v) for v in estimate.matrix))
        # The same release again: the same numbers, at no cost; the helper releases
        # its share to the leader alone.
        self.assertEqual(self.admin.estimate("py-two", release_rho=info.rho / 2), estimate)
        with self.assertRaises(ldp.LdpcovError.FailedPrecondition) as refused:
            helper.estimate("py-two", release_rho=info.rho / 2)
        self.assertIn("leader", str(refused.exception))
        print(
            f"two-aggregator: {n} reports counted by the leader and the helper",
            file=sys.stderr,
        )

    def test_radius_phase_chooses_the_radius_from_noisy_norms(self):
        # p = 4: the default candidate radii run from sqrt(p)/4 = 0.5 to 16 sqrt(p) = 32
        # by factors of sqrt(2); every norm here is 1.5, in [sqrt(2), 2), so once the
        # phase is closed the radius is 2 (nothing clipped, least noise), or larger if
        # noise made a far interval look inhabited (each empty one passes the rule's
        # 3.5-sd floor with probability 2e-4): never smaller.
        epsilon = 8.0
        spec = ldp.CollectionSpecInput(
            collection_id="py-radius",
            dim=4,
            epsilon=epsilon,
            delta=DELTA,
            clip_radius=0.0,
            min_reports=1,
            radius_phase_share=0.5,
        )
        info = self.admin.create_collection(spec)
        self.assertTrue(info.radius_pending)
        self.assertEqual(info.radius_phase_collection_id, "py-radius.radius")
        with self.assertRaises(ldp.LdpcovError.InvalidInput):
            self.admin.create_collection(
                ldp.CollectionSpecInput(
                    collection_id="py-radius-bad", dim=4, epsilon=1.0, delta=DELTA,
                    clip_radius=3.0, min_reports=1, radius_phase_share=0.5,
                )
            )
        with tempfile.TemporaryDirectory() as ledger_dir:
            config = ldp.LedgerConfig(
                dir=ledger_dir, lifetime_epsilon=100.0, period_days=0, delta=DELTA
            )
            device = ldp.Device.connect(self.url, ledger=config)
            others = ldp.Device.connect(self.url)
            x = [0.9, 0.0, 1.2, 0.0]
            device.submit("py-radius", x)
            for k in range(399):
                a = 0.01 * k
                others.submit("py-radius", [1.5 * math.cos(a), 0.0, 1.5 * math.sin(a), 0.0])
            self.assertEqual(self.admin.status("py-radius.radius").reports, 400)
            self.assertEqual(self.admin.status("py-radius").reports, 0)
            self.admin.close_collection("py-radius.radius")
            chosen = device.collection("py-radius")
            self.assertFalse(chosen.radius_pending)
            self.assertGreaterEqual(chosen.clip_radius, 2.0 * (1 - 1e-12))
            # The same device object now sends its vector, to the collection itself.
            device.submit("py-radius", x)
            self.assertEqual(self.admin.status("py-radius").reports, 1)
            # Both reports are on the ledger, their rho adding up to one report's of
            # the collection without a phase (the ledger composes rho and states it as
            # epsilon at its delta: rho + 2 sqrt(rho ln(1/delta))).
            alone = self.admin.create_collection(
                ldp.CollectionSpecInput(
                    collection_id="py-radius-alone", dim=4, epsilon=epsilon, delta=DELTA,
                    clip_radius=3.0, min_reports=1,
                )
            )
            one = alone.rho + 2.0 * math.sqrt(alone.rho * math.log(1.0 / DELTA))
            spent = device.spent_epsilon()
            self.assertLessEqual(spent, one * (1 + 1e-9))
            self.assertGreater(spent, one * (1 - 1e-6))



class Canary:
    """A TCP listener that counts the connections made to it and answers none: the
    aggregator address given to devices that report through the relay, to show that
    they never call the aggregator."""

    def __init__(self):
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(64)
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            self.connections += 1
            connection.close()

    def close(self):
        self._socket.close()


def wait_for_count(admin, collection_id, expected, timeout):
    """The aggregator's count of ``collection_id`` once it reaches ``expected``, or the
    last one read after ``timeout`` seconds (a relay forwards on its batch check)."""
    deadline = time.monotonic() + timeout
    while True:
        reports = admin.status(collection_id).reports
        if reports >= expected or time.monotonic() >= deadline:
            return reports
        time.sleep(0.1)


def f64(value):
    """A vector file's f64: its IEEE-754 bits are authoritative."""
    return struct.unpack(">d", bytes.fromhex(value["bits"]))[0]


@unittest.skipUnless(
    os.environ.get("LDPCOV_PY_FROM_WHEEL") == "1", "run from a module directory, not a wheel"
)
class WheelTest(unittest.TestCase):
    """The package under test is the one the wheel installed (run_tests.sh)."""

    def test_imported_from_the_installed_wheel(self):
        import importlib.metadata

        self.assertEqual(importlib.metadata.version("ldpcov-ffi"), "0.1.0")
        here = os.path.realpath(ldp.__file__)
        self.assertTrue(
            here.startswith(os.path.realpath(sys.prefix) + os.sep),
            f"ldpcov_ffi imported from {here}, outside the environment {sys.prefix}",
        )
        self.assertNotEqual(sys.prefix, sys.base_prefix, "not a virtual environment")


class TestVectorsTest(unittest.TestCase):
    """The library the bindings load reproduces testing/vectors/reports-v1.json."""

    @classmethod
    def setUpClass(cls):
        with open(VECTORS, encoding="utf-8") as f:
            cls.vectors = json.load(f)

    def build(self, case, seed=None):
        return ldp.reports_with_seed_for_test_vectors(
            bytes.fromhex(case["params_hex"]),
            int(case["seed"]) if seed is None else seed,
            [[f64(v) for v in r["x"]] for r in case["reports"]],
            [bytes.fromhex(r["report_id"]) for r in case["reports"]],
        )

    def test_every_case_byte_for_byte(self):
        self.assertEqual(self.vectors["format"], "ldpcov-report-vectors")
        self.assertEqual(self.vectors["version"], 1)
        cases = self.vectors["cases"]
        self.assertGreaterEqual(len(cases), 17)
        checked = 0
        for case in cases:
            with self.subTest(case=case["name"]):
                built = self.build(case)
                self.assertEqual(len(built), len(case["reports"]))
                for n, (got, want) in enumerate(zip(built, case["reports"])):
                    self.assertEqual(got.payload.hex(), want["payload"], f"report {n}")
                    self.assertEqual(got.report_message.hex(), want["report_message"], f"report {n}")
                    checked += 1
        self.assertEqual(checked, sum(len(c["reports"]) for c in cases))

    def test_another_seed_gives_other_bytes(self):
        # The check above could not pass by accident: the noise depends on the seed.
        case = next(c for c in self.vectors["cases"] if c["name"].startswith("gaussian-svec-i32"))
        built = self.build(case, seed=int(case["seed"]) + 1)
        self.assertNotEqual(built[0].payload.hex(), case["reports"][0]["payload"])

    def test_bad_arguments_raise(self):
        case = self.vectors["cases"][0]
        params = bytes.fromhex(case["params_hex"])
        with self.assertRaises(ldp.LdpcovError.InvalidInput):
            ldp.reports_with_seed_for_test_vectors(params, 1, [[0.5]], [bytes(15)])
        with self.assertRaises(ldp.LdpcovError.InvalidInput):
            ldp.reports_with_seed_for_test_vectors(params, 1, [[0.5], [0.25]], [bytes(16)])
        with self.assertRaises(ldp.LdpcovError.InvalidInput):
            ldp.reports_with_seed_for_test_vectors(params, 1, [[math.nan]], [bytes(16)])
        with self.assertRaises(ldp.LdpcovError.InvalidInput):
            ldp.reports_with_seed_for_test_vectors(b"\xff\xff", 1, [], [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
