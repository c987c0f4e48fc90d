import Foundation
import Glibc

/// A real nginx from Debian as the tests' proxy or load balancer: its own prefix, config and logs in a
/// test folder, in the foreground, stopped by process id.
public enum Nginx {
    /// The location block every proxy of the tests uses: the headers a proxy sets, and unbuffered both
    /// ways, so that tus PATCH bodies stream and long-polls stay open.
    public static func passing(to upstream: String, extra: String = "") -> String {
        """
        location / {
            proxy_pass http://\(upstream);
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Forwarded-Host $http_host;
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout 600s;
            proxy_send_timeout 600s;
            \(extra)
        }
        """
    }

    /// Starts nginx with `http` as the body of its `http { }` block (server and upstream blocks) and
    /// waits until it accepts on `port`. The access log is `nginx/logs/access.log` in `directory`.
    public static func start(_ directory: TemporaryDirectory, port: Int, http: String) throws -> ChildProcess {
        let prefix = directory.child("nginx")
        try FileManager.default.createDirectory(atPath: prefix + "/logs", withIntermediateDirectories: true)
        let config = """
            \(getuid() == 0 ? "user root;" : "")
            worker_processes 1;
            error_log \(prefix)/logs/error.log info;
            pid \(prefix)/nginx.pid;
            events { worker_connections 256; }
            http {
                log_format upstreams '$request_method $uri $status upstream=$upstream_addr';
                access_log \(prefix)/logs/access.log upstreams;
                client_body_temp_path \(prefix)/body;
                proxy_temp_path \(prefix)/proxy;
                fastcgi_temp_path \(prefix)/fastcgi;
                uwsgi_temp_path \(prefix)/uwsgi;
                scgi_temp_path \(prefix)/scgi;
                client_max_body_size 0;
                \(http)
            }
            """
        let path = prefix + "/nginx.conf"
        try writeFile(path, config)
        let nginx = try ChildProcess("/usr/sbin/nginx", ["-p", prefix, "-c", path, "-g", "daemon off;"],
                                     logDirectory: directory.path, label: "nginx")
        try waitUntilSync("nginx to listen on \(port)", timeout: 15) {
            if !nginx.isRunning { throw NginxFailed(log: nginx.errors + (readFile(prefix + "/logs/error.log") ?? "")) }
            return accepts(port: port)
        }
        return nginx
    }

    /// What nginx logged of each request: `METHOD URI STATUS upstream=ADDRESS[, ADDRESS]`.
    public static func accessLog(_ directory: TemporaryDirectory) -> String {
        readFile(directory.child("nginx") + "/logs/access.log") ?? ""
    }

    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    public static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}

/// nginx would not start or stopped: its output and error log.
public struct NginxFailed: Error, CustomStringConvertible {
    public var log: String
    public var description: String { "nginx exited: \(log)" }
}
