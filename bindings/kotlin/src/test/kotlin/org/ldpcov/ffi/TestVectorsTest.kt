// The library the Kotlin bindings load reproduces the shared test vectors
// (testing/vectors/reports-v1.json) byte for byte: the JUnit twin of the Python check.
//
// The file's path comes from the system property ldpcov.vectors (set in pom.xml).
package org.ldpcov.ffi

import com.google.gson.JsonObject
import com.google.gson.JsonParser
import java.io.File
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import uniffi.ldpcov_ffi.CollectionSpecInput
import uniffi.ldpcov_ffi.LdpcovException
import uniffi.ldpcov_ffi.Mechanism
import uniffi.ldpcov_ffi.TestVectorReport
import uniffi.ldpcov_ffi.collectionParamsForTestVectors
import uniffi.ldpcov_ffi.reportsWithSeedForTestVectors

private fun String.hexToBytes(): ByteArray {
    require(length % 2 == 0) { "odd-length hex" }
    return ByteArray(length / 2) { i -> substring(2 * i, 2 * i + 2).toInt(16).toByte() }
}

private fun ByteArray.toHex(): String = joinToString("") { "%02x".format(it) }

/// A vector file's f64: its IEEE-754 bits are authoritative.
private fun f64(value: JsonObject): Double =
    java.lang.Double.longBitsToDouble(java.lang.Long.parseUnsignedLong(value["bits"].asString, 16))

class TestVectorsTest {
    private val vectors: JsonObject = run {
        val path = System.getProperty("ldpcov.vectors") ?: error("ldpcov.vectors is not set")
        JsonParser.parseString(File(path).readText()).asJsonObject
    }
    private val cases = vectors["cases"].asJsonArray.map { it.asJsonObject }

    private fun build(case: JsonObject, seed: ULong = case["seed"].asString.toULong()): List<TestVectorReport> {
        val reports = case["reports"].asJsonArray.map { it.asJsonObject }
        return reportsWithSeedForTestVectors(
            case["params_hex"].asString.hexToBytes(),
            seed,
            reports.map { r -> r["x"].asJsonArray.map { f64(it.asJsonObject) } },
            reports.map { r -> r["report_id"].asString.hexToBytes() },
        )
    }

    @Test
    fun everyCaseByteForByte() {
        assertEquals("ldpcov-report-vectors", vectors["format"].asString)
        assertEquals(1, vectors["version"].asInt)
        assertTrue(cases.size >= 17, "only ${cases.size} cases")
        var checked = 0
        for (case in cases) {
            val name = case["name"].asString
            val want = case["reports"].asJsonArray.map { it.asJsonObject }
            val built = build(case)
            assertEquals(want.size, built.size, name)
            for ((n, pair) in built.zip(want).withIndex()) {
                val (got, expected) = pair
                assertEquals(expected["payload"].asString, got.payload.toHex(), "$name report $n payload")
                assertEquals(
                    expected["report_message"].asString,
                    got.reportMessage.toHex(),
                    "$name report $n message",
                )
                checked++
            }
        }
        assertEquals(cases.sumOf { it["reports"].asJsonArray.size() }, checked)
    }

    @Test
    fun anotherSeedGivesOtherBytes() {
        // The check above could not pass by accident: the noise depends on the seed.
        val case = cases.first { it["name"].asString.startsWith("gaussian-svec-i32") }
        val built = build(case, case["seed"].asString.toULong() + 1uL)
        assertNotEquals(case["reports"].asJsonArray[0].asJsonObject["payload"].asString, built[0].payload.toHex())
    }

    @Test
    fun badArgumentsRaise() {
        val params = cases[0]["params_hex"].asString.hexToBytes()
        assertThrows<LdpcovException.InvalidInput> {
            reportsWithSeedForTestVectors(params, 1uL, listOf(listOf(0.5)), listOf(ByteArray(15)))
        }
        assertThrows<LdpcovException.InvalidInput> {
            reportsWithSeedForTestVectors(params, 1uL, listOf(listOf(0.5), listOf(0.25)), listOf(ByteArray(16)))
        }
        assertThrows<LdpcovException.InvalidInput> {
            reportsWithSeedForTestVectors(params, 1uL, listOf(listOf(Double.NaN)), listOf(ByteArray(16)))
        }
        assertThrows<LdpcovException.InvalidInput> {
            reportsWithSeedForTestVectors(byteArrayOf(-1, -1), 1uL, listOf(), listOf())
        }
    }

    @Test
    fun paramsDerivedFromASpecBuildReports() {
        // What the JVM benchmark (src/bench/kotlin) builds its reports from.
        val spec = CollectionSpecInput(
            collectionId = "kt-params",
            dim = 4u,
            epsilon = 1.0,
            delta = 1e-6,
            clipRadius = 1.0,
            minReports = 1uL,
        )
        val params = collectionParamsForTestVectors(spec)
        val built = reportsWithSeedForTestVectors(params, 1uL, listOf(listOf(0.1, 0.2, 0.3, 0.4)), listOf(ByteArray(16)))
        // A created collection collects the mean and covariance: p + p(p + 1)/2 i32 entries.
        assertEquals((4 + 10) * 4, built.single().payload.size)
        // A rank-one collection is pure epsilon: with a delta it is refused.
        assertThrows<LdpcovException.InvalidInput> {
            collectionParamsForTestVectors(spec.copy(mechanism = Mechanism.RANK_ONE))
        }
    }
}
