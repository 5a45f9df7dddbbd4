#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// The C globals `stdout` and `stderr` are shared mutable state to Swift 6;
// these go to the file descriptors instead. `fflush(nil)` flushes every C
// stream (what print() buffered) without naming one.

/// A line of diagnostics on standard error (unbuffered, like stderr).
func writeError(_ text: String) {
    var bytes = Array(text.utf8)
    bytes.withUnsafeMutableBytes { writeAll(2, UnsafeRawBufferPointer($0)) }
}

/// Raw bytes on standard output, after whatever print() has buffered.
func writeOutput(_ bytes: UnsafeRawBufferPointer) {
    fflush(nil)
    writeAll(1, bytes)
}

/// Flushes what print() buffered (progress lines read by another process).
func flushOutput() {
    fflush(nil)
}

private func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) {
    var offset = 0
    while offset < bytes.count, let base = bytes.baseAddress {
        let written = write(descriptor, base + offset, bytes.count - offset)
        if written < 0 {
            if errno == EINTR { continue }
            return  // the reader went away: nothing better to do with diagnostics
        }
        offset += written
    }
}
