// swift-tools-version:6.0
import PackageDescription

// One module per step of a change's journey; executables only wire. C libraries come from Debian
// through system-library targets (see docs/architecture.md).
let strict: [SwiftSetting] = [.enableUpcomingFeature("ExistentialAny")]

let package = Package(
    name: "sinki",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "sinkid", targets: ["sinkid"]),
    ],
    targets: [
        // C libraries, each through its pkg-config name.
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CUV", pkgConfig: "libuv", providers: [.apt(["libuv1-dev"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        // Typed wrappers for libcurl's variadic setopt calls, which Swift cannot call.
        .target(name: "CCurlShim", dependencies: ["CCurl"]),
        // Linux calls the Glibc module hides (syncfs, renameat2).
        .target(name: "CSystemShim"),
        // SO_PEERCRED's struct ucred, which the Glibc module hides (the control socket's peer check).
        .target(name: "CSocketShim"),
        // Typed wrappers for libmicrohttpd's variadic start and connection-info calls.
        .target(name: "CMicroHTTPDShim", dependencies: ["CMicroHTTPD"]),

        .target(name: "SinkiRecord", swiftSettings: strict),
        .target(name: "SinkiSupport", dependencies: ["CSQLite", "CZlib", "CCrypto", "CSystemShim"], swiftSettings: strict),
        .target(name: "SinkiLoop", dependencies: ["CUV", "SinkiSupport"], swiftSettings: strict),
        .target(name: "SinkiTransfer", dependencies: ["CCurl", "CCurlShim", "CUV", "SinkiLoop", "SinkiRecord", "SinkiSupport"], swiftSettings: strict),
        .target(name: "SinkiWatch", dependencies: ["CUV", "SinkiLoop", "SinkiRecord", "SinkiSupport"], swiftSettings: strict),
        .target(name: "SinkiState", dependencies: ["CSystemShim", "CUV", "SinkiConfig", "SinkiLoop", "SinkiMerge", "SinkiPlan", "SinkiRecord", "SinkiSupport"], swiftSettings: strict),
        .target(name: "SinkiMerge", dependencies: ["CSystemShim", "SinkiConfig", "SinkiLoop", "SinkiRecord", "SinkiSupport"], swiftSettings: strict),
        .target(name: "SinkiConfig", dependencies: ["SinkiRecord", "SinkiSupport"], swiftSettings: strict),
        // The pure planner of issue 21: three trees (Remote, Local, Synced) in, the next operation out.
        .target(name: "SinkiPlan", dependencies: ["SinkiRecord"], swiftSettings: strict),
        .target(name: "SinkiServer", dependencies: ["CMicroHTTPD", "CPQ", "CMicroHTTPDShim", "SinkiRecord", "SinkiSupport"], swiftSettings: strict),
        .target(name: "SinkiControl", dependencies: ["CSocketShim", "SinkiLoop", "SinkiRecord", "SinkiSupport"], swiftSettings: strict),
        .target(name: "SinkiAgent", dependencies: ["CSystemShim", "SinkiConfig", "SinkiControl", "SinkiLoop", "SinkiMerge", "SinkiRecord", "SinkiServer", "SinkiState", "SinkiSupport", "SinkiTransfer", "SinkiWatch"], swiftSettings: strict),
        .target(name: "SinkiCLI", dependencies: ["SinkiAgent", "SinkiConfig", "SinkiControl", "SinkiLoop", "SinkiRecord", "SinkiServer", "SinkiState", "SinkiSupport", "SinkiTransfer"], swiftSettings: strict),
        .executableTarget(name: "sinkid", dependencies: ["SinkiCLI"], swiftSettings: strict),
        // The chunker's throughput and edit-locality figures (bench/run chunker, docs/chunking.md).
        .executableTarget(name: "bench-chunker", dependencies: ["SinkiSupport"], swiftSettings: strict),

        .target(name: "SinkiTestSupport", dependencies: ["CSystemShim", "SinkiRecord", "SinkiSupport"], path: "Tests/SinkiTestSupport", swiftSettings: strict),
        .testTarget(name: "SinkiRecordTests", dependencies: ["SinkiRecord", "SinkiTestSupport"], swiftSettings: strict),
        .testTarget(name: "SinkiSupportTests", dependencies: ["SinkiSupport", "SinkiTestSupport"], swiftSettings: strict),
        .testTarget(name: "SinkiLoopTests", dependencies: ["SinkiLoop", "SinkiTestSupport"], swiftSettings: strict),
        .testTarget(name: "SinkiTransferTests", dependencies: ["SinkiTransfer", "SinkiServer", "SinkiTestSupport"], exclude: ["Fixtures"], swiftSettings: strict),
        .testTarget(name: "SinkiWatchTests", dependencies: ["SinkiLoop", "SinkiSupport", "SinkiWatch", "SinkiTestSupport"], swiftSettings: strict),
        .testTarget(name: "SinkiStateTests", dependencies: ["SinkiConfig", "SinkiMerge", "SinkiState", "SinkiTestSupport"], swiftSettings: strict),
        .testTarget(name: "SinkiMergeTests", dependencies: ["SinkiMerge", "SinkiConfig", "SinkiRecord", "SinkiSupport", "SinkiTestSupport"], swiftSettings: strict),
        .testTarget(name: "SinkiConfigTests", dependencies: ["SinkiConfig", "SinkiTestSupport"], swiftSettings: strict),
        .testTarget(name: "SinkiServerTests", dependencies: ["SinkiServer", "SinkiRecord", "SinkiSupport", "SinkiTestSupport"], swiftSettings: strict),
        .testTarget(name: "SinkiPlanTests", dependencies: ["SinkiPlan", "SinkiRecord"], swiftSettings: strict),
        .testTarget(name: "SinkiAgentTests", dependencies: ["SinkiAgent", "SinkiTestSupport"], swiftSettings: strict),
        .testTarget(name: "SinkiControlTests", dependencies: ["SinkiControl", "SinkiLoop", "SinkiRecord", "SinkiSupport", "SinkiTestSupport"], swiftSettings: strict),
        .testTarget(name: "SinkiCLITests", dependencies: ["SinkiCLI", "SinkiConfig", "SinkiControl", "SinkiRecord", "SinkiTestSupport"], exclude: ["Fixtures"], swiftSettings: strict),
    ],
    swiftLanguageModes: [.v6]
)

// libFuzzer targets (Fuzz/, docs/fuzzing.md): declared only when Fuzz/run.sh builds them, with
// SINKI_FUZZ=1, into a build folder of their own. Each needs libFuzzer's `main`, which only a build
// with `--sanitize fuzzer` links, so a normal `swift build` must not see them.
if Context.environment["SINKI_FUZZ"] == "1" {
    let fuzzTargets: [(name: String, dependencies: [Target.Dependency])] = [
        ("config", ["SinkiConfig", "SinkiRecord"]),
        ("record-json", ["SinkiRecord"]),
        ("tus-headers", ["SinkiRecord", "SinkiServer", "SinkiTransfer"]),
        ("record-path", ["SinkiRecord"]),
    ]
    for target in fuzzTargets {
        package.targets.append(.executableTarget(name: "fuzz-" + target.name, dependencies: target.dependencies,
                                                 path: "Fuzz/Targets/" + target.name, swiftSettings: strict))
    }
}
