import SinkiSupport

/// Why a tus upload or an asset download failed, with the URL it concerns.
public enum TusError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The network failed (see `TransferError`); retried until the attempts run out.
    case transfer(TransferError)
    /// The server answered with a status the step cannot go on from.
    case status(Int, url: String, detail: String)
    /// The server lacks something the upload needs (creation, say) or answered against the protocol.
    case protocolViolation(url: String, detail: String)
    /// The file is larger than the server's `Tus-Max-Size`.
    case tooLarge(size: Int64, maxSize: Int64, url: String)
    /// The local file could not be read or written.
    case io(SystemError)
    /// The file changed (size) while it was being uploaded.
    case fileChanged(path: String)
    /// A downloaded asset does not have the size and SHA-256 its record says.
    case contentMismatch(url: String, detail: String)
    /// The attempts ran out; `last` is the last failure.
    indirect case gaveUp(attempts: Int, last: TusError)
    /// The awaiting task was cancelled.
    case cancelled

    public var description: String {
        switch self {
        case .transfer(let error): error.description
        case .status(let status, let url, let detail): "\(url): HTTP \(status)\(detail.isEmpty ? "" : ": " + detail)"
        case .protocolViolation(let url, let detail): "\(url): \(detail)"
        case .tooLarge(let size, let maxSize, let url): "\(url) takes uploads of at most \(maxSize) bytes; the file has \(size)"
        case .io(let error): error.description
        case .fileChanged(let path): "\(path) changed while it was being uploaded"
        case .contentMismatch(let url, let detail): "\(url): \(detail)"
        case .gaveUp(let attempts, let last): "gave up after \(attempts) attempts: \(last)"
        case .cancelled: "cancelled"
        }
    }

    /// Whether trying again later may succeed: the network or the server, not the request, failed.
    public var isTemporary: Bool {
        switch self {
        case .transfer(let error): error.isTemporary
        case .status(let status, _, _): status >= 500 || status == 423 || status == 429 || status == 408
        case .contentMismatch: true
        case .gaveUp(_, let last): last.isTemporary
        default: false
        }
    }
}
