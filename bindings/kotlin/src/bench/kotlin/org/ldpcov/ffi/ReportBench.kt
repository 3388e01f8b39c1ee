// The time to build one report on the JVM through the Kotlin bindings, without an
// aggregator: bindings/kotlin/bench.sh (Maven profile `bench`) runs this main against a
// release build of libldpcov_ffi.
//
// What is timed: reportsWithSeedForTestVectors(params, seed, inputs, ids), the bindings'
// offline report builder (the same Perturber::report as Device.submit: clip, the exact
// discrete Gaussian noise or the rank-one draw, encoding; with a seeded
// DiscreteGaussianSampler, the device's sampler seeded differently), including the JNA
// calls and the conversion of the arguments and results. Each call also decodes and
// re-derives the collection from its parameters and builds a fresh sampler (its tables
// for the collection's sigma), which a device does once per collection, so two figures
// per case:
//   one call     - one report per call: what one isolated report costs from Kotlin,
//                  the per-call setup included;
//   per report   - the marginal cost of a report, (T(B) - T(1)) / (B - 1) with T(B) the
//                  time of a call building B reports: what each report costs once the
//                  collection and the sampler exist (as Device.submit after its first
//                  report; compare with the Rust criterion figure).
// Each figure is the median over REPS repetitions of a timed loop, after a warm-up.
// The parameters come from collectionParamsForTestVectors (what an aggregator announces
// for the spec: mean and covariance, epsilon 1, delta 1e-6 or 0 for rank-one, radius 1).
package org.ldpcov.ffi

import kotlin.math.sin
import kotlin.math.sqrt
import uniffi.ldpcov_ffi.CollectionSpecInput
import uniffi.ldpcov_ffi.Mechanism
import uniffi.ldpcov_ffi.collectionParamsForTestVectors
import uniffi.ldpcov_ffi.reportsWithSeedForTestVectors

private const val REPS = 15
private const val WARM_UP_NANOS = 1_000_000_000L
// A repetition runs calls until this much time has passed (at least one call).
private const val REP_NANOS = 100_000_000L

private var sink = 0L
private var seed = 1uL

private fun median(values: List<Double>): Double {
    val sorted = values.sorted()
    val n = sorted.size
    return if (n % 2 == 1) sorted[n / 2] else (sorted[n / 2 - 1] + sorted[n / 2]) / 2
}

/// Median microseconds per call over REPS timed loops of calls building `batch` reports each.
private fun measure(params: ByteArray, x: List<Double>, batch: Int): Double {
    val inputs = List(batch) { x }
    val ids = List(batch) { ByteArray(16) { i -> (i + 1).toByte() } }
    fun call() {
        val reports = reportsWithSeedForTestVectors(params, seed++, inputs, ids)
        sink += reports.sumOf { it.payload.size.toLong() }
    }
    val warmUpEnd = System.nanoTime() + WARM_UP_NANOS
    var warmUps = 0
    while (warmUps < 3 || System.nanoTime() < warmUpEnd) {
        call()
        warmUps++
    }
    val perCall = List(REPS) {
        val start = System.nanoTime()
        var n = 0
        var elapsed: Long
        do {
            call()
            n++
            elapsed = System.nanoTime() - start
        } while (elapsed < REP_NANOS)
        elapsed / 1e3 / n
    }
    return median(perCall)
}

private fun format(micros: Double): String = when {
    micros >= 10_000 -> "%.1f ms".format(micros / 1e3)
    micros >= 1_000 -> "%.2f ms".format(micros / 1e3)
    micros >= 100 -> "%.0f µs".format(micros)
    micros >= 10 -> "%.1f µs".format(micros)
    else -> "%.2f µs".format(micros)
}

fun main() {
    val mechanisms = listOf(
        "Gaussian svec i32" to Mechanism.GAUSSIAN,
        "Gaussian triu i32" to Mechanism.GAUSSIAN_TRIU,
        "rank-one i16" to Mechanism.RANK_ONE,
    )
    val dims = listOf(10, 100, 1000)
    println(
        "JVM ${System.getProperty("java.vm.name")} ${System.getProperty("java.version")}, " +
            "JNA ${com.sun.jna.Native.VERSION}, ${Runtime.getRuntime().availableProcessors()} CPUs; " +
            "median of $REPS repetitions of >= ${REP_NANOS / 1_000_000} ms after a ${WARM_UP_NANOS / 1_000_000_000} s warm-up",
    )
    println("| mechanism | p | payload bytes | one call (1 report) | per report (marginal) |")
    println("| --- | --- | --- | --- | --- |")
    for ((name, mechanism) in mechanisms) {
        for (p in dims) {
            val params = collectionParamsForTestVectors(
                CollectionSpecInput(
                    collectionId = "bench",
                    dim = p.toUInt(),
                    epsilon = 1.0,
                    delta = if (mechanism == Mechanism.RANK_ONE) 0.0 else 1e-6,
                    clipRadius = 1.0,
                    minReports = 1uL,
                    mechanism = mechanism,
                ),
            )
            // The Rust bench's input (client/benches/report.rs).
            val x = List(p) { i -> sin(i * 0.37) / sqrt(p.toDouble()) }
            val bytes = reportsWithSeedForTestVectors(params, 0uL, listOf(x), listOf(ByteArray(16)))[0].payload.size
            val batch = when {
                p >= 1000 -> 8
                p >= 100 -> 64
                else -> 256
            }
            val single = measure(params, x, 1)
            val many = measure(params, x, batch)
            val marginal = (many - single) / (batch - 1)
            println("| $name | $p | $bytes | ${format(single)} | ${format(marginal)} (B = $batch) |")
        }
    }
    System.err.println("(checksum $sink)")
}
