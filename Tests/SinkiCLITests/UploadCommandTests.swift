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

    /// Issue 25, item 5: `sinkid upload` to an https endpoint whose certificate a private CA signed
    /// (openssl's, nginx with it in front of the server): refused with 78 and a word on --ca-file, then
    /// trusted through the CA's certificate given by --ca-file, the config's `[server] ca-file` and
    /// CURL_CA_BUNDLE alike.
    @Test func anUploadTrustsAPrivateCAThroughItsFlagTheConfigOrCurlsVariable() throws {
        let cluster = Cluster("sinki-upload-ca")
        try cluster.startServer(extra: ["--behind-proxy"])
        let proxy = ProxyTests()
        let (ca, serverCert, key) = try proxy.privateCA(in: cluster.directory)
        let cert = ca
        let port = freePort()
        let nginx = try proxy.startNginx(cluster.directory, port: port, upstream: cluster.serverPort, cert: serverCert, key: key)
        defer { _ = nginx.stop() }
        let file = cluster.directory.child("save.bin")
        try Data(randomData(100_000)).write(to: URL(fileURLWithPath: file))
        let token = try #require(try cluster.tokenFile(for: "uploader"))
        let home = cluster.directory.child("home")
        try FileManager.default.createDirectory(atPath: home + "/.config/sinki", withIntermediateDirectories: true)
        let isolated = ["HOME": home, "XDG_CONFIG_HOME": home + "/.config", "CURL_CA_BUNDLE": ""]
        func upload(_ extra: [String], _ environment: [String: String], label: String) throws -> (status: Int32, errors: String) {
            let run = try ChildProcess(sinkidExecutable(), ["upload", file, "--to", "https://127.0.0.1:\(port)/v1/uploads/", "--token-file", token,
                                                            "--state", cluster.directory.child("state-" + label)] + extra,
                                       environment: environment, logDirectory: cluster.directory.path, label: "upload-" + label)
            return (run.waitForExit(timeout: 60), run.errors)
        }
        let untrusted = try upload([], isolated, label: "untrusted")
        #expect(untrusted.status == 78 && untrusted.errors.contains("--ca-file"), "\(untrusted.errors)")
        #expect(try upload(["--ca-file", cert], isolated, label: "flag").status == 0)
        var bundle = isolated
        bundle["CURL_CA_BUNDLE"] = cert
        #expect(try upload([], bundle, label: "bundle").status == 0)
        try writeFile(home + "/.config/sinki/sinki.conf", "[server]\nca-file = \(cert)\n")
        #expect(try upload([], isolated, label: "config").status == 0)
        let missing = try upload(["--ca-file", cluster.directory.child("none.pem")], isolated, label: "missing")
        #expect(missing.status == 78 && missing.errors.contains("--ca-file") && missing.errors.split(separator: "\n").count == 1, "\(missing.errors)")
    }

    /// A `ca-file` that cannot be read is a config error with its file and line (exit 78), found when
    /// the config is read, not at the first request.
    @Test func aMissingCAFileIsAConfigErrorWithItsLine() throws {
        let directory = TemporaryDirectory("sinki-upload-ca")
        let config = directory.child("sinki.conf")
        try writeFile(config, "[server]\nca-file = \(directory.child("none.pem"))\n")
        try FileManager.default.createDirectory(atPath: directory.child("root"), withIntermediateDirectories: true)
        let run = try sinkid(["--config", config, "--root", directory.child("root"), "--state", directory.child("state")], in: directory)
        #expect(run.code == 78 && run.errors.contains("sinki.conf:2:") && run.errors.contains("ca-file"), "\(run.errors)")
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
