import SinkiLoop
import SinkiRecord
import SinkiSupport

extension TusClient {
    /// Throws `tooLarge` when the server takes no file of `size` bytes (`Tus-Max-Size`): a file sent
    /// as chunks is refused whole, before any chunk goes, as one uploaded whole would be.
    public func checkSize(_ size: Int64, isolation: isolated (any Actor)? = #isolation) async throws(TusError) {
        let capabilities = try await discover()
        if let maxSize = capabilities.maxSize, size > maxSize { throw .tooLarge(size: size, maxSize: maxSize, url: server.endpoint) }
    }
}
