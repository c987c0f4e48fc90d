import SinkiRecord
import SinkiSupport

/// How the current runs of sending and of applying go, for the whole of each (`progress` in status):
/// what a first upload or a first download of many files shows besides each file's bar.
public struct ProgressSummary: Sendable, Equatable {
    /// Local changes being sent: nil when none waits.
    public var upload: UploadProgress?
    /// Remote changes being applied here: nil when none waits.
    public var download: DownloadProgress?

    public init(upload: UploadProgress? = nil, download: DownloadProgress? = nil) {
        self.upload = upload
        self.download = download
    }
}

/// `sent` of `total` local changes since the run began, the content bytes they carried, changes a
/// second and the seconds left at that pace (nil until half a second shows a pace).
public struct UploadProgress: Sendable, Equatable {
    public var sent: Int
    public var total: Int
    public var bytes: Int64
    public var rate: Double?
    public var secondsLeft: Double?

    public init(sent: Int, total: Int, bytes: Int64, rate: Double?, secondsLeft: Double?) {
        self.sent = sent
        self.total = total
        self.bytes = bytes
        self.rate = rate
        self.secondsLeft = secondsLeft
    }
}

/// `applied` of `total` remote changes since the run began, `bytes` of `totalBytes` of their content
/// here (files still moving counted as far as they came), bytes a second and the seconds left.
public struct DownloadProgress: Sendable, Equatable {
    public var applied: Int
    public var total: Int
    public var bytes: Int64
    public var totalBytes: Int64
    public var rate: Double?
    public var secondsLeft: Double?

    public init(applied: Int, total: Int, bytes: Int64, totalBytes: Int64, rate: Double?, secondsLeft: Double?) {
        self.applied = applied
        self.total = total
        self.bytes = bytes
        self.totalBytes = totalBytes
        self.rate = rate
        self.secondsLeft = secondsLeft
    }

    /// "1,234 of 10,000 applied (1.2 GiB of 4.0 GiB), 40.0 MiB/s, about 1m left".
    public var words: String {
        var text = "\(HumanUnits.grouped(applied)) of \(HumanUnits.grouped(total)) applied (\(HumanUnits.bytes(bytes)) of \(HumanUnits.bytes(totalBytes)))"
        if let rate { text += ", \(HumanUnits.bytes(Int64(rate)))/s" }
        if let secondsLeft { text += ", about \(HumanUnits.duration(secondsLeft)) left" }
        return text
    }
}

extension ProgressSummary {
    var json: JSONValue {
        func seconds(_ value: Double?) -> JSONValue { value.map { .double(($0 * 10).rounded() / 10) } ?? .null }
        let upload: JSONValue = self.upload.map {
            .object([("sent", .int(Int64($0.sent))), ("total", .int(Int64($0.total))), ("bytes", .int($0.bytes)),
                     ("rate", $0.rate.map { .double($0.rounded()) } ?? .null), ("eta", seconds($0.secondsLeft))])
        } ?? .null
        let download: JSONValue = self.download.map {
            .object([("applied", .int(Int64($0.applied))), ("total", .int(Int64($0.total))), ("bytes", .int($0.bytes)),
                     ("totalBytes", .int($0.totalBytes)), ("rate", $0.rate.map { .double($0.rounded()) } ?? .null), ("eta", seconds($0.secondsLeft))])
        } ?? .null
        return .object([("upload", upload), ("download", download)])
    }

    init(_ fields: JSONFields) throws(ControlError) {
        self.init()
        if fields.has("upload") {
            let up = try fields.object("upload")
            upload = UploadProgress(sent: Int(try up.int("sent")), total: Int(try up.int("total")), bytes: try up.int("bytes"),
                                    rate: up.has("rate") ? try up.double("rate") : nil, secondsLeft: up.has("eta") ? try up.double("eta") : nil)
        }
        if fields.has("download") {
            let down = try fields.object("download")
            download = DownloadProgress(applied: Int(try down.int("applied")), total: Int(try down.int("total")), bytes: try down.int("bytes"),
                                        totalBytes: try down.int("totalBytes"), rate: down.has("rate") ? try down.double("rate") : nil,
                                        secondsLeft: down.has("eta") ? try down.double("eta") : nil)
        }
    }
}
