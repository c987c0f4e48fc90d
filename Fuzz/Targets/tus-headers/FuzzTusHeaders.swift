@testable import SinkiRecord
@testable import SinkiServer
@testable import SinkiTransfer

/// Fuzz target `tus-headers` (docs/fuzzing.md): the bytes as the value of every tus header that either
/// end parses — the server's `Upload-Metadata`, `Upload-Checksum`, `Upload-Offset`/`Upload-Length`,
/// `Upload-Concat: final;…`, `Content-Type`, `Range`, and the client's `OPTIONS` answer, `Location`,
/// `Upload-Expires`, `ETag`, `Content-Range` and its saved upload state. Each parser refuses (nil or a
/// typed error) or gives a value that keeps its rules and, where the header is written back, reads back
/// the same.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTusHeaders(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    // libmicrohttpd and libcurl hand header values over as bytes that become Strings with invalid UTF-8
    // repaired, so that is what the parsers can ever see.
    let header = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    checkServerHeaders(header)
    checkClientHeaders(header)
    return 0
}

func require(_ condition: Bool, _ what: @autoclosure () -> String, _ header: String) {
    if !condition { fatalError("tus-headers invariant broken: \(what()) for \(quoted(header))") }
}

func checkServerHeaders(_ header: String) {
    if let metadata = try? TusMetadata.parse(header) {
        require(metadata.pairs.count <= TusMetadata.maxPairs, "at most \(TusMetadata.maxPairs) pairs", header)
        require(Set(metadata.pairs.map(\.key)).count == metadata.pairs.count, "each key once", header)
        for pair in metadata.pairs {
            require((1...TusMetadata.maxKeyBytes).contains(pair.key.utf8.count), "key length", header)
            require((pair.value?.count ?? 0) <= TusMetadata.maxValueBytes, "value length", header)
        }
        // HEAD answers the header re-encoded from the pairs: it must parse to the same pairs.
        require((try? TusMetadata.parse(metadata.header)) == metadata, "Upload-Metadata re-encoded reads back", header)
    }
    if let checksum = TusChecksum.parse(header) {
        require(TusChecksum.parse(checksum.header) == checksum, "Upload-Checksum re-encoded reads back", header)
    }
    if let (algorithm, digest) = try? TusEndpoint.checksum(header) {
        require(digest.count == algorithm.byteCount, "a digest of its algorithm's size", header)
    }
    if let value = try? TusEndpoint.integer(header, "Upload-Offset") {
        require(value >= 0, "Upload-Offset is not negative", header)
    }
    _ = try? TusEndpoint.metadata(header)
    _ = try? TusEndpoint.checkChunkType(header)
    if header.hasPrefix("final;"), let ids = try? TusEndpoint.finalParts(header) {
        require(!ids.isEmpty && ids.allSatisfy { !$0.isEmpty && !$0.contains("/") }, "final parts are upload ids", header)
    }
    for size: Int64 in [0, 1, 10, 1 << 40, Int64.max] {
        if case let .range(first, last) = AssetRoute.parseRange(header, size: size) {
            require(first >= 0 && first <= last && last < size, "a range inside an asset of \(size) bytes", header)
        }
    }
    _ = AssetRoute.rangeApplies(header, sha256: String(repeating: "a", count: 64))
}

func checkClientHeaders(_ header: String) {
    let response = HTTPResponse(status: 204, headers: ["Tus-Version", "Tus-Extension", "Tus-Max-Size", "Tus-Checksum-Algorithm",
                                                       "Upload-Offset", "Location", "ETag"].map { ($0, header) }, body: [])
    let capabilities = TusCapabilities.parse(response)
    _ = capabilities.checksum()
    let server = TusServer(endpoint: "http://127.0.0.1:7071/v1/uploads/")
    let resolved = server.resolve(header)
    require(resolved.hasPrefix("http://") || resolved.hasPrefix("https://"), "a Location resolves to an http(s) URL", header)
    if let expires = HTTPDate.parse(header) {
        // What the server writes from a parsed date must parse to that same date.
        require(HTTPDate.parse(HTTPDate.format(expires)) == expires, "Upload-Expires re-formatted reads back", header)
    }
    let sha256 = UploadRun.sha256(fromETag: header)
    require(sha256.isEmpty || (sha256.utf8.count == 64 && sha256 == sha256.lowercased()), "an ETag gives a SHA-256 or nothing", header)
    _ = EasyHandle.contentRangeStart(header)
    if let state = TusUploadState(encoded: header) {
        require(TusUploadState(encoded: state.encoded) == state, "the saved upload state reads back", header)
    }
}
