// End-to-end test of the Kotlin bindings (uniffi.ldpcov_ffi) on the JVM against a real
// aggregator: the JUnit twin of bindings/python/test_ldpcov.py.
//
// Run by bindings/kotlin/run_tests.sh (or `cargo test -p ldpcov-ffi`), which sets
// LDPCOV_URL (environment) and jna.library.path (system property: where JNA finds
// libldpcov_ffi).
package org.ldpcov.ffi

import java.nio.file.Files
import java.util.Random
import kotlin.math.ln
import kotlin.math.sqrt
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Assumptions.assumeTrue
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import org.junit.jupiter.api.assertThrows
import uniffi.ldpcov_ffi.Admin
import uniffi.ldpcov_ffi.CollectionInfo
import uniffi.ldpcov_ffi.CollectionSpecInput
import uniffi.ldpcov_ffi.Device
import uniffi.ldpcov_ffi.HelperConfig
import uniffi.ldpcov_ffi.LdpcovException
import uniffi.ldpcov_ffi.LedgerConfig
import uniffi.ldpcov_ffi.Mechanism
import uniffi.ldpcov_ffi.PolicyConfig
import uniffi.ldpcov_ffi.RelayConfig
import uniffi.ldpcov_ffi.SubmitResult
import uniffi.ldpcov_ffi.WireEncoding

// Every collection of the test: epsilon = 1 per report at delta = 1e-6.
private const val EPSILON = 1.0
private const val DELTA = 1e-6
// Reports the main collection receives from Kotlin.
private const val N_REPORTS = 300
private const val DIM = 4

private fun spec(id: String, dim: Int, minReports: Long) = CollectionSpecInput(
    collectionId = id,
    dim = dim.toUInt(),
    epsilon = EPSILON,
    delta = DELTA,
    clipRadius = 3.0,
    minReports = minReports.toULong(),
)

// The shuffled collection's batch window, seconds: the relay forms no batch from a window
// younger than this (the aggregator's default is an hour).
private const val SHUFFLE_WINDOW_SECONDS = 1
// How long the relay may take to forward a full window to the aggregator.
private const val RELAY_TIMEOUT_MS = 30_000L

/// The aggregator's count of `collectionId` once it reaches `expected`, or the last one
/// read after `timeoutMs` (a relay forwards on its batch check, not within a call).
private fun waitForCount(admin: Admin, collectionId: String, expected: ULong, timeoutMs: Long): ULong {
    val deadline = System.nanoTime() + timeoutMs * 1_000_000
    while (true) {
        val reports = admin.status(collectionId).reports
        if (reports >= expected || System.nanoTime() >= deadline) return reports
        Thread.sleep(100)
    }
}

/// Epsilon at `delta` of rho-zCDP (Bun & Steinke 2016, Proposition 1.3), as the ledger states it.
private fun epsilonOfRho(rho: Double, delta: Double) = rho + 2.0 * sqrt(rho * ln(1.0 / delta))

@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class BindingsTest {
    private val url: String = System.getenv("LDPCOV_URL")
        ?: error("LDPCOV_URL must name an aggregator (run bindings/kotlin/run_tests.sh)")
    private lateinit var admin: Admin
    private lateinit var info: CollectionInfo
    private lateinit var deviceInfo: CollectionInfo
    private lateinit var sampler: String
    private lateinit var results: List<SubmitResult>
    private var before = 0uL
    private var after = 0uL

    @BeforeAll
    fun sendTheMainCollection() {
        admin = Admin.connect(url)
        info = admin.createCollection(spec("kt-e2e", DIM, 100))
        before = admin.status("kt-e2e").reports
        // A device without a ledger stands in for a fleet of devices here.
        Device.connect(url).use { device ->
            sampler = device.noiseSamplerKind()
            deviceInfo = device.collection("kt-e2e")
            val rng = Random(20240601)
            results = List(N_REPORTS) {
                device.submit("kt-e2e", List(DIM) { rng.nextGaussian() })
            }
        }
        after = admin.status("kt-e2e").reports
    }

    @AfterAll
    fun closeAdmin() {
        admin.close()
    }

    @Test
    fun deviceUsesTheExactSamplerAndRederivedParameters() {
        assertEquals("exact-discrete-gaussian", sampler)
        // Both sides re-derive the parameters from the same spec.
        assertEquals(info, deviceInfo)
        assertEquals(DIM.toUInt(), info.dim)
        assertEquals(WireEncoding.I32, info.encoding)
        assertEquals(Mechanism.GAUSSIAN, info.mechanism)
        assertTrue(info.sigma > 0.0)
    }

    @Test
    fun countMovedByExactlyTheReportsSent() {
        assertEquals(0uL, before)
        assertEquals(N_REPORTS.toULong(), after - before)
        val ids = results.map { it.reportId }.toSet()
        assertEquals(N_REPORTS, ids.size, "report ids must be fresh")
        assertTrue(ids.all { it.length == 32 })
        assertFalse(results.any { it.duplicate })
    }

    @Test
    fun estimateComesFromTheDaemon() {
        val est = admin.estimate("kt-e2e")
        assertEquals("kt-e2e", est.collectionId)
        assertEquals(N_REPORTS.toULong(), est.reports)
        assertEquals(DIM.toUInt(), est.dim)
        assertEquals(DIM * (DIM + 1) / 2, est.upperTriangle.size)
        assertEquals(DIM * DIM, est.matrix.size)
        assertTrue(est.psdProjected)
        // The full matrix is the packed triangle mirrored: row-major i <= j.
        var k = 0
        for (i in 0 until DIM) {
            for (j in i until DIM) {
                assertEquals(est.upperTriangle[k], est.matrix[i * DIM + j])
                assertEquals(est.upperTriangle[k], est.matrix[j * DIM + i])
                k++
            }
        }
    }

    @Test
    fun estimateBelowMinimumIsRefused() {
        admin.createCollection(spec("kt-few", 2, 1000))
        assertThrows<LdpcovException.FailedPrecondition> { admin.estimate("kt-few") }
    }

    @Test
    fun badInputRaisesTypedErrorsAndCountsNothing() {
        admin.createCollection(spec("kt-bad", 3, 1))
        val ledgerDir = Files.createTempDirectory("ldpcov-kt-ledger")
        Device.connect(url, ledger = LedgerConfig(dir = ledgerDir.toString())).use { device ->
            val bad = listOf(
                listOf(1.0, 2.0),
                listOf(1.0, 2.0, 3.0, 4.0),
                listOf(1.0, Double.NaN, 0.0),
                listOf(Double.POSITIVE_INFINITY, 0.0, 0.0),
                listOf(0.0, Double.NEGATIVE_INFINITY, 0.0),
            )
            for (x in bad) {
                assertThrows<LdpcovException.InvalidInput>("$x") { device.submit("kt-bad", x) }
            }
            // Refused before the ledger was charged, and nothing was sent.
            // +0.0 exactly (assertEquals on doubles compares the bits: -0.0 would fail).
            val spent = device.spentEpsilon() ?: error("a device with a ledger reports its spend")
            assertEquals(0.0, spent)
            assertEquals("0.0", spent.toString())
            assertEquals(0uL, admin.status("kt-bad").reports)
            assertThrows<LdpcovException.NotFound> {
                device.submit("kt-no-such-collection", listOf(0.0, 0.0, 0.0))
            }
            // The count is live: one good report moves it by one.
            device.submit("kt-bad", listOf(0.5, -0.5, 1.0))
            assertEquals(1uL, admin.status("kt-bad").reports)
        }
    }

    @Test
    fun deviceWithoutLedgerReportsNoSpend() {
        Device.connect(url).use { device -> assertNull(device.spentEpsilon()) }
    }

    @Test
    fun privacyPolicyRefusesWeakerCollections() {
        admin.createCollection(spec("kt-policy", 2, 1))
        val strict = PolicyConfig(maxEpsilon = EPSILON / 2, maxDelta = DELTA)
        Device.connect(url, policy = strict).use { device ->
            assertThrows<LdpcovException.PolicyRefused> { device.submit("kt-policy", listOf(0.1, 0.2)) }
        }
        assertEquals(0uL, admin.status("kt-policy").reports)
    }

    @Test
    fun aRadiusPhaseChoosesTheRadiusFromNoisyNorms() {
        // p = 4: the default candidates run from sqrt(p)/4 = 0.5 to 16 sqrt(p) = 32 by
        // factors of sqrt(2); every norm is 1.5, in [sqrt(2), 2): the radius chosen is 2,
        // or larger if noise made a far interval look inhabited, never smaller.
        val epsilon = 8.0
        val created = admin.createCollection(
            CollectionSpecInput(
                collectionId = "kt-radius",
                dim = 4u,
                epsilon = epsilon,
                delta = DELTA,
                clipRadius = 0.0,
                minReports = 1uL,
                radiusPhaseShare = 0.5,
            ),
        )
        assertTrue(created.radiusPending)
        assertEquals("kt-radius.radius", created.radiusPhaseCollectionId)
        Device.connect(url).use { device ->
            for (k in 0 until 300) {
                val a = 0.01 * k
                device.submit("kt-radius", listOf(1.5 * kotlin.math.cos(a), 0.0, 1.5 * kotlin.math.sin(a), 0.0))
            }
            assertEquals(300uL, admin.status("kt-radius.radius").reports)
            assertEquals(0uL, admin.status("kt-radius").reports)
            admin.closeCollection("kt-radius.radius")
            val chosen = device.collection("kt-radius")
            assertFalse(chosen.radiusPending)
            assertTrue(chosen.clipRadius >= 2.0 * (1 - 1e-12), "radius ${chosen.clipRadius}")
            // The same device object now sends the vector itself.
            device.submit("kt-radius", listOf(0.9, 0.0, 1.2, 0.0))
        }
        assertEquals(1uL, admin.status("kt-radius").reports)
    }

    @Test
    fun ledgerRefusesPastTheBudget() {
        val created = admin.createCollection(spec("kt-ledger", 3, 1))
        // A lifetime budget of 2.5 reports' rho admits exactly 2 reports (2 rho <= 2.5 rho
        // < 3 rho); the margin of half a report is far above the rounding of the conversion.
        val budget = epsilonOfRho(2.5 * created.rho, DELTA)
        val ledgerDir = Files.createTempDirectory("ldpcov-kt-ledger")
        val config = LedgerConfig(
            dir = ledgerDir.toString(),
            lifetimeEpsilon = budget,
            periodDays = 0u,
            delta = DELTA,
        )
        Device.connect(url, ledger = config).use { device ->
            device.submit("kt-ledger", listOf(1.0, 0.0, -1.0))
            device.submit("kt-ledger", listOf(0.0, 2.0, 0.5))
            assertThrows<LdpcovException.BudgetExceeded> {
                device.submit("kt-ledger", listOf(0.3, 0.3, 0.3))
            }
            assertEquals(2uL, admin.status("kt-ledger").reports)
            val spent = device.spentEpsilon() ?: error("a device with a ledger reports its spend")
            assertEquals(epsilonOfRho(2.0 * created.rho, DELTA), spent, 1e-9)
        }
        // The spend is on disk: a new device over the same directory refuses too.
        Device.connect(url, ledger = config).use { again ->
            assertThrows<LdpcovException.BudgetExceeded> {
                again.submit("kt-ledger", listOf(0.3, 0.3, 0.3))
            }
        }
        assertEquals(2uL, admin.status("kt-ledger").reports)
    }

    @Test
    fun rankOneCollectionsAreCreatedAndCount() {
        val rankOne = CollectionSpecInput(
            collectionId = "kt-rank-one",
            dim = DIM.toUInt(),
            epsilon = 2.0,
            delta = 0.0,
            clipRadius = 3.0,
            minReports = 50uL,
            mechanism = Mechanism.RANK_ONE,
        )
        val created = admin.createCollection(rankOne)
        assertEquals(Mechanism.RANK_ONE, created.mechanism)
        assertEquals(WireEncoding.I16, created.encoding)
        assertEquals(0.0, created.sigma)
        // Pure epsilon implies epsilon^2/2-zCDP: what a ledger adds up.
        assertEquals(2.0 * 2.0 / 2, created.rho, 1e-12)
        Device.connect(url).use { device ->
            assertEquals(created, device.collection("kt-rank-one"))
            val rng = Random(7)
            repeat(60) { device.submit("kt-rank-one", List(DIM) { rng.nextGaussian() }) }
        }
        assertEquals(60uL, admin.status("kt-rank-one").reports)
        val est = admin.estimate("kt-rank-one")
        assertEquals(60uL, est.reports)
        assertTrue(est.upperTriangle.all { it.isFinite() })
        // A rank-one collection with a delta is refused, and nothing is created.
        assertThrows<LdpcovException.InvalidInput> {
            admin.createCollection(rankOne.copy(collectionId = "kt-rank-one-delta", delta = 1e-6))
        }
        assertThrows<LdpcovException.NotFound> { admin.status("kt-rank-one-delta") }
    }

    @Test
    fun shuffledCollectionsGoSealedThroughTheRelay() {
        // The relay of cargo test's harness (bindings/tests/languages/common/relay.rs): the
        // real ldpcov-relay, in process, in front of the aggregator. It takes one report
        // per device token (LDPCOV_RELAY_DEVICE_TOKENS: one per report here) and, on its
        // next batch check, forwards a window as one shuffled batch once the window is
        // the collection's batch window old and holds the collection's minimum (never
        // fewer than LDPCOV_RELAY_MIN_BATCH, its floor). Run by hand there is none
        // (skipped, which bindings/tests/languages/kotlin.rs does not allow).
        val relayUrl = System.getenv("LDPCOV_RELAY_URL")
        assumeTrue(relayUrl != null, "no relay (LDPCOV_RELAY_URL): run through cargo test -p ldpcov-ffi")
        checkNotNull(relayUrl)
        val batch = System.getenv("LDPCOV_RELAY_MIN_BATCH").toInt()
        val tokens = System.getenv("LDPCOV_RELAY_DEVICE_TOKENS").split(",")
        assertTrue(tokens.size >= batch, "one device token per report: ${tokens.size} for $batch")
        val epsilon = 2.0
        val created = admin.createCollection(
            CollectionSpecInput(
                collectionId = "kt-shuffled",
                dim = 3u,
                epsilon = epsilon,
                delta = 0.0,
                clipRadius = 1.0,
                minReports = 1uL,
                mechanism = Mechanism.RANK_ONE,
                shuffleMinBatchSize = batch.toULong(),
                shuffleBatchWindowSeconds = SHUFFLE_WINDOW_SECONDS.toULong(),
            ),
        )
        assertTrue(created.shuffled)
        val rng = Random(33)
        val x = { List(3) { rng.nextDouble() - 0.5 } }
        // A ledger of its own for each device (a phone has one).
        val ledgers = Files.createTempDirectory("kt-shuffled-ledgers")
        val ledger = { name: String ->
            val dir = Files.createDirectory(ledgers.resolve(name))
            LedgerConfig(dir = dir.toString(), lifetimeEpsilon = 1000.0, periodDays = 0u, delta = DELTA)
        }
        // Without a relay the device refuses before charging anything.
        Device.connect(url, ledger = ledger("direct")).use { direct ->
            val refused = assertThrows<LdpcovException.Sealing> { direct.submit("kt-shuffled", x()) }
            assertTrue(refused.message!!.contains("relay"), refused.message)
            assertEquals(0.0, direct.spentEpsilon()!!)
        }
        // One device per report, each with its own device token and ledger: the relay
        // takes one report per device and collection.
        val devices = List(batch) { i ->
            Device.connect(url, ledger = ledger("device-$i"), relay = RelayConfig(url = relayUrl, token = tokens[i]))
        }
        try {
            assertEquals(created, devices[0].collection("kt-shuffled"))
            devices.dropLast(1).forEach { assertFalse(it.submit("kt-shuffled", x()).duplicate) }
            // The relay holds them: past the window it waits for the minimum, so the
            // aggregator has seen nothing yet.
            Thread.sleep(SHUFFLE_WINDOW_SECONDS * 1000L + 1000L)
            assertEquals(0uL, admin.status("kt-shuffled").reports)
            assertFalse(devices.last().submit("kt-shuffled", x()).duplicate)
            // The relay forwards the batch on its next check, not within the call: the
            // aggregator opens and counts every sealed report.
            val counted = waitForCount(admin, "kt-shuffled", batch.toULong(), RELAY_TIMEOUT_MS)
            assertEquals(
                batch.toULong(),
                counted,
                "the aggregator counts $counted of the $batch reports the relay took after " +
                    "${RELAY_TIMEOUT_MS / 1000} s: the relay did not forward them as one batch",
            )
            // Each device spent epsilon0 once (rho = epsilon0^2 / 2), as a direct report would.
            devices.forEach { assertEquals(epsilonOfRho(epsilon * epsilon / 2, DELTA), it.spentEpsilon()!!, 1e-9) }
        } finally {
            devices.forEach { it.close() }
        }
        // A device token the relay does not know: refused, nothing counted.
        Device.connect(url, relay = RelayConfig(url = relayUrl, token = "wrong")).use { stranger ->
            assertThrows<LdpcovException.Unauthorized> { stranger.submit("kt-shuffled", x()) }
        }
        assertEquals(batch.toULong(), admin.status("kt-shuffled").reports)
    }

    @Test
    fun twoAggregatorCollectionsGoThroughTheLeaderAndTheHelper() {
        // cargo test's harness serves LDPCOV_URL as the leader of a second in-process
        // aggregator, the helper at LDPCOV_HELPER_URL (bindings/tests/languages/common).
        // Run by hand there is none (skipped, which bindings/tests/languages/kotlin.rs
        // does not allow).
        val helperUrl = System.getenv("LDPCOV_HELPER_URL")
        assumeTrue(helperUrl != null, "no helper (LDPCOV_HELPER_URL): run through cargo test -p ldpcov-ffi")
        checkNotNull(helperUrl)
        val n = 12
        val two = CollectionSpecInput(
            collectionId = "kt-two",
            dim = 3u,
            epsilon = EPSILON,
            delta = DELTA,
            clipRadius = 1.0,
            minReports = n.toULong(),
            twoAggregator = true,
        )
        Admin.connect(helperUrl).use { helper ->
            // The leader refuses a collection its helper does not hold yet.
            assertThrows<LdpcovException.FailedPrecondition> { admin.createCollection(two) }
            helper.createCollection(two)
            val created = admin.createCollection(two)
            assertTrue(created.twoAggregator)
            assertFalse(created.shuffled)
            val rng = Random(54)
            val x = { List(3) { rng.nextDouble() - 0.5 } }
            val dir = Files.createTempDirectory("kt-two-ledger")
            val ledger = LedgerConfig(dir = dir.toString(), lifetimeEpsilon = 1000.0, periodDays = 0u, delta = DELTA)
            // Without a helper the device refuses before charging anything: it seals the
            // helper's share only to a key the helper itself publishes.
            Device.connect(url, ledger = ledger).use { alone ->
                val refused = assertThrows<LdpcovException.TwoAggregator> { alone.submit("kt-two", x()) }
                assertTrue(refused.message!!.contains("helper"), refused.message)
                assertEquals(0.0, alone.spentEpsilon()!!)
            }
            Device.connect(url, ledger = ledger, helper = HelperConfig(url = helperUrl)).use { device ->
                assertEquals(created, device.collection("kt-two"))
                repeat(n) { assertFalse(device.submit("kt-two", x()).duplicate) }
                // Each report is charged the collection's rho once.
                assertEquals(epsilonOfRho(n * created.rho, DELTA), device.spentEpsilon()!!, 1e-9)
            }
            // The leader verifies its queue with the helper in the background: both count
            // every valid report once.
            assertEquals(n.toULong(), waitForCount(admin, "kt-two", n.toULong(), RELAY_TIMEOUT_MS))
            assertEquals(n.toULong(), helper.status("kt-two").reports)
            // The estimate is a release of a stated rho from each aggregator's budget; the
            // same release again answers the same numbers; the helper releases to the
            // leader alone.
            assertThrows<LdpcovException.InvalidInput> { admin.estimate("kt-two") }
            val estimate = admin.estimate("kt-two", releaseRho = created.rho / 2)
            assertEquals(n.toULong(), estimate.reports)
            assertEquals(9, estimate.matrix.size)
            assertTrue(estimate.matrix.all { it.isFinite() })
            assertEquals(estimate, admin.estimate("kt-two", releaseRho = created.rho / 2))
            val helperRefused = assertThrows<LdpcovException.FailedPrecondition> {
                helper.estimate("kt-two", releaseRho = created.rho / 2)
            }
            assertTrue(helperRefused.message!!.contains("leader"), helperRefused.message)
        }
    }
}
