import Foundation
import SinkiSupport
import SinkiTestSupport
import Testing

/// `sinkid upload` against `sinkid serve`: output, state, exit codes.
@Suite(.serialized) struct UploadCommandTests {
    @Test func uploadsPrintsTheURLAndForgetsTheFinishedUpload() throws {
        let cluster = Cluster("sinki-upload-cli")
        try cluster.startServer()
        let file = cluster.directory.child("save.bin")
        let data = Data(randomData(700_000))
        try data.write(to: URL(fileURLWithPath: file))
        let state = cluster.directory.child("state")
        let token = try #require(try cluster.tokenFile(for: "uploader"))
        let upload = try ChildProcess(sinkidExecutable(), ["upload", file, "--to", cluster.serverURL + "/v1/uploads/", "--state", state,
                                                           "--chunk-size", "256KiB", "--metadata", "game=Sinki Quest", "--token-file", token],
                                      logDirectory: cluster.directory.path, label: "upload")
        #expect(upload.waitForExit(timeout: 30) == 0, "\(upload.errors)")
        let url = upload.output.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(url.hasPrefix(cluster.serverURL + "/v1/uploads/"))
        let id = String(try #require(url.split(separator: "/").last))
        #expect(FileManager.default.contents(atPath: cluster.directory.child("server-data") + "/uploads/\(id).bin") == data)
        let info = readFile(cluster.directory.child("server-data") + "/uploads/\(id).info") ?? ""
        #expect(info.contains("game U2lua2kgUXVlc3Q="))
        #expect(info.contains("filename c2F2ZS5iaW4="))
        #expect(FileManager.default.fileExists(atPath: state + "/state.db"))
    }

    @Test(arguments: [
        (["upload"], Int32(64)),
        (["upload", "/nonexistent-file"], Int32(64)),
        (["upload", "/nonexistent-file", "--to", "ftp://x/"], Int32(64)),
        (["upload", "/nonexistent-file", "--to", "http://127.0.0.1:9/v1/uploads/", "--metadata", "novalue"], Int32(64)),
        (["upload", "/nonexistent-file", "--to", "http://127.0.0.1:9/v1/uploads/", "--chunk-size", "lots"], Int32(64)),
    ])
    func usageErrorsAreOneLineAndExit64(arguments: [String], code: Int32) throws {
        let directory = TemporaryDirectory("sinki-upload-cli")
        let process = try ChildProcess(sinkidExecutable(), arguments + ["--state", directory.child("state")], logDirectory: directory.path, label: "upload")
        #expect(process.waitForExit(timeout: 10) == code)
        #expect(process.errors.split(separator: "\n").count == 1, "\(process.errors)")
    }

    @Test func anUnreachableServerIsExit69() throws {
        let directory = TemporaryDirectory("sinki-upload-cli")
        let file = directory.child("small.bin")
        try Data("hello".utf8).write(to: URL(fileURLWithPath: file))
        let process = try ChildProcess(sinkidExecutable(), ["upload", file, "--to", "http://127.0.0.1:\(freePort())/v1/uploads/",
                                                            "--state", directory.child("state"), "--attempts", "1", "--log-level", "error"],
                                       logDirectory: directory.path, label: "upload")
        #expect(process.waitForExit(timeout: 20) == 69)
        #expect(process.errors.contains("cannot reach"), "\(process.errors)")
    }
}
