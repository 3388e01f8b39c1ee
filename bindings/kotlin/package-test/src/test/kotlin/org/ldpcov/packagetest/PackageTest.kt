// The packaged jar works on its own: installed from a Maven repository, with JNA on the
// classpath and nothing of the build tree, it loads the native library it carries and
// sends a report that a real aggregator counts.
//
// Run by bindings/kotlin/run_tests.sh (see package-test/pom.xml), with LDPCOV_URL
// (environment) naming the aggregator.
package org.ldpcov.packagetest

import com.sun.jna.Native
import com.sun.jna.Platform
import java.io.File
import java.net.JarURLConnection
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import uniffi.ldpcov_ffi.Admin
import uniffi.ldpcov_ffi.CollectionSpecInput
import uniffi.ldpcov_ffi.Device

/// The files mapped into this process (Linux: /proc/self/maps), or null elsewhere.
private fun mappedFiles(): Set<String>? {
    val maps = File("/proc/self/maps")
    if (!maps.exists()) return null
    return maps.readLines().mapNotNull { line ->
        line.indexOf('/').takeIf { it >= 0 }?.let { line.substring(it) }
    }.toSet()
}

class PackageTest {
    private val url: String = System.getenv("LDPCOV_URL")
        ?: error("LDPCOV_URL must name an aggregator (run bindings/kotlin/run_tests.sh)")

    @Test
    fun theInstalledJarCarriesTheLibraryAndAReportIsCounted() {
        // Nothing points JNA at a directory: it must find the library on the classpath.
        assertNull(System.getProperty("jna.library.path"), "jna.library.path is set")
        assertTrue(System.getenv("LD_LIBRARY_PATH").isNullOrEmpty(), "LD_LIBRARY_PATH is set")
        // JNA's own native part, loaded now: what is mapped before the bindings load theirs.
        assertTrue(Native.POINTER_SIZE > 0)
        val mappedBefore = mappedFiles()

        // The bindings' classes come from the jar installed in the scratch repository...
        val repo = File(System.getProperty("ldpcov.repo") ?: error("ldpcov.repo is not set")).canonicalFile
        val jar = File(Device::class.java.protectionDomain.codeSource.location.toURI()).canonicalFile
        assertTrue(jar.isFile && jar.name.endsWith(".jar"), "Device was loaded from $jar")
        assertTrue(jar.startsWith(repo), "$jar is not in the scratch repository $repo")
        assertTrue(jar.path.contains("/org/ldpcov/ldpcov-ffi-kotlin/"), "$jar")

        // ... and so does the library, at JNA's resource path for this platform.
        val resource = "${Platform.RESOURCE_PREFIX}/${System.mapLibraryName("ldpcov_ffi")}"
        val found = javaClass.classLoader.getResource(resource)
        assertNotNull(found, "$resource is not on the classpath")
        val connection = found!!.openConnection() as JarURLConnection
        assertEquals(jar, File(connection.jarFileURL.toURI()).canonicalFile, "$resource comes from another jar")

        // A real report against a real aggregator: the count moves by exactly one.
        val id = "kt-package-${System.nanoTime()}"
        Admin.connect(url).use { admin ->
            admin.createCollection(
                CollectionSpecInput(
                    collectionId = id,
                    dim = 3u,
                    epsilon = 1.0,
                    delta = 1e-6,
                    clipRadius = 3.0,
                    minReports = 1uL,
                ),
            )
            val before = admin.status(id).reports
            Device.connect(url).use { device ->
                assertEquals("exact-discrete-gaussian", device.noiseSamplerKind())
                val sent = device.submit(id, listOf(0.5, -1.0, 2.0))
                assertEquals(32, sent.reportId.length)
                assertFalse(sent.duplicate)
            }
            assertEquals(before + 1uL, admin.status(id).reports)
        }

        // The library JNA loaded is the copy it unpacked from the jar into jna.tmpdir, not
        // a file of the build tree (Linux: the process's own memory map says so).
        val mappedAfter = mappedFiles()
        if (mappedBefore != null && mappedAfter != null) {
            val tmp = File(System.getProperty("jna.tmpdir") ?: error("jna.tmpdir is not set")).canonicalPath
            val loaded = mappedAfter - mappedBefore
            assertTrue(loaded.any { it.startsWith(tmp) }, "nothing unpacked into $tmp was loaded: $loaded")
            assertTrue(mappedAfter.none { "ldpcov_ffi" in it }, "a build tree's library is mapped: $loaded")
        }
    }
}
