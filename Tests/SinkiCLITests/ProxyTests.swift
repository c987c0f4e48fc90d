import Foundation
import Glibc
import SinkiRecord
import SinkiTestSupport
import Testing

/// Behind a TLS proxy (issue 12): a real nginx from Debian in front of `sinkid serve --behind-proxy`,
/// with a self-signed certificate the agents trust through `[server] ca-file`.
@Suite(.serialized) struct ProxyTests {
    /// A self-signed certificate for 127.0.0.1 (as an IP subject alternative name, which curl checks).
    func certificate(in directory: TemporaryDirectory) throws -> (cert: String, key: String) {
        let cert = directory.child("proxy.crt"), key = directory.child("proxy.key")
        let openssl = try ChildProcess("/usr/bin/openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                                                            "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                                       logDirectory: directory.path, label: "openssl")
        #expect(openssl.waitForExit(timeout: 30) == 0, "openssl: \(openssl.errors)")
        return (cert, key)
    }

    /// A private CA (its own key and self-signed certificate) and a certificate for 127.0.0.1 it signed,
    /// as a company's CA would: clients trust the CA's certificate, never the server's own.
    func privateCA(in directory: TemporaryDirectory) throws -> (ca: String, cert: String, key: String) {
        let ca = directory.child("ca.crt"), caKey = directory.child("ca.key")
        let cert = directory.child("server.crt"), key = directory.child("server.key"), request = directory.child("server.csr")
        let extensions = directory.child("server.ext")
        try writeFile(extensions, "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n")
        for (label, arguments) in [
            ("ca", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", caKey, "-out", ca, "-days", "2", "-subj", "/CN=sinki test CA",
                    "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"]),
            ("csr", ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", request, "-subj", "/CN=127.0.0.1"]),
            ("sign", ["x509", "-req", "-in", request, "-CA", ca, "-CAkey", caKey, "-CAcreateserial", "-out", cert, "-days", "2",
                      "-extfile", extensions]),
        ] {
            let openssl = try ChildProcess("/usr/bin/openssl", arguments, logDirectory: directory.path, label: "openssl-" + label)
            #expect(openssl.waitForExit(timeout: 30) == 0, "openssl \(label): \(openssl.errors)")
        }
        return (ca, cert, key)
    }

    /// nginx on `port` with TLS, passing everything to the sync server on `upstream`.
    func startNginx(_ directory: TemporaryDirectory, port: Int, upstream: Int, cert: String, key: String) throws -> ChildProcess {
        try Nginx.start(directory, port: port, http: """
            server {
                listen 127.0.0.1:\(port) ssl;
                ssl_certificate \(cert);
                ssl_certificate_key \(key);
                \(Nginx.passing(to: "127.0.0.1:\(upstream)"))
            }
            """)
    }

    @Test func twoAgentsConvergeThroughNginxWithTLSAndTusGetsAbsoluteHTTPSLocations() async throws {
        let cluster = Cluster("sinki-proxy")
        try cluster.startServer(extra: ["--behind-proxy"])
        let (cert, key) = try certificate(in: cluster.directory)
        let port = freePort()
        let nginx = try startNginx(cluster.directory, port: port, upstream: cluster.serverPort, cert: cert, key: key)
        defer { _ = nginx.stop() }
        let url = "https://127.0.0.1:\(port)"
        let config = cluster.directory.child("agent.conf")
        try writeFile(config, "[server]\nca-file = \(cert)\n")

        // Without the certificate trusted, the proxy is refused: the check is real.
        let untrusted = try cluster.startAgent("c", server: url)
        try await waitUntil("c to fail the TLS check", timeout: 15) { untrusted.errors.contains("SSL") || untrusted.errors.contains("certificate") }
        #expect(untrusted.errors.contains("[server] ca-file"), "the certificate error names the setting that fixes it: \(untrusted.errors)")
        cluster.stopAgent("c")

        try cluster.startAgent("a", server: url, extra: ["--config", config])
        try cluster.startAgent("b", server: url, extra: ["--config", config])
        let big = Data(randomData(3 << 20))
        try writeFile(cluster.root("a") + "/small.txt", "through the proxy")
        try writeFile(cluster.root("a") + "/big.bin", big)
        try await cluster.waitForConvergence("a", "b", timeout: 30) { $0.entries.count == 2 }
        #expect(FileManager.default.contents(atPath: cluster.root("b") + "/big.bin") == big)
        try writeFile(cluster.root("b") + "/back.txt", "and back")
        try await cluster.waitForConvergence("a", "b", timeout: 10) { $0.entries.count == 3 }

        // The chunks went up and came down through the proxy.
        let log = try #require(cluster.agent("a")?.errors)
        #expect(log.contains("POST \(url)/v1/chunks/batch"), "no chunk upload through the proxy")
        #expect(cluster.agent("b")?.errors.contains("POST \(url)/v1/chunks/fetch") == true, "no chunk download through the proxy")
        let access = Nginx.accessLog(cluster.directory)
        #expect(access.contains("POST /v1/chunks/batch") && access.contains("POST /v1/chunks/fetch"))
        #expect(access.contains("GET /v1/changes"))
        // An upload created without its bytes (as a plain tus client makes one) gets the https URL the
        // server built from the proxy's headers, which is where its PATCHes then go.
        let token = try String(contentsOfFile: try #require(try cluster.tokenFile(for: "a")), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let curl = try ChildProcess("/usr/bin/curl", ["-sS", "-D", "-", "-o", "/dev/null", "--cacert", cert, "-X", "POST",
                                                      "-H", "Tus-Resumable: 1.0.0", "-H", "Upload-Length: 10", "-H", "Authorization: Bearer \(token)",
                                                      url + "/v1/uploads/"], logDirectory: cluster.directory.path, label: "curl")
        #expect(curl.waitForExit(timeout: 30) == 0, "curl: \(curl.errors)")
        let location = curl.output.split(separator: "\r\n").first { $0.lowercased().hasPrefix("location:") }
        #expect(location?.dropFirst("location:".count).trimmingCharacters(in: .whitespaces).hasPrefix(url + "/v1/uploads/") == true,
                "the upload's Location was not the proxy's https URL: \(curl.output)")
    }
}
