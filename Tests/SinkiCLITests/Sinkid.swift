import Foundation
import SinkiRecord
import SinkiTestSupport

/// One finished run of the built `sinkid`.
struct SinkidRun {
    var code: Int32
    var output: String
    var errors: String

    /// stdout as JSON.
    func json() throws -> JSONValue { try JSONValue.parse(Array(output.utf8)) }
}

/// Runs `sinkid arguments` to its end (killed after `timeout`), in `directory`'s log folder.
func sinkid(_ arguments: [String], in directory: TemporaryDirectory, prefix: [String] = [], environment: [String: String] = [:],
            timeout: Double = 30) throws -> SinkidRun {
    let executable = prefix.first ?? sinkidExecutable()
    let arguments = prefix.isEmpty ? arguments : Array(prefix.dropFirst()) + [sinkidExecutable()] + arguments
    let process = try ChildProcess(executable, arguments, environment: environment, logDirectory: directory.path,
                                   label: "cli-\(UInt64.random(in: 0...UInt64.max))")
    let code = process.waitForExit(timeout: timeout)
    return SinkidRun(code: code, output: process.output, errors: process.errors)
}
