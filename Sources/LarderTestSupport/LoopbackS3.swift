import Foundation

/// The S3-compatible store the tests of this process use, started at most once.
///
/// With `LARDER_TEST_S3=s3://…` (and `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`), tests use
/// that store. Otherwise, when OpenStack Swift is installed (`scripts/deps.sh`), the first test
/// that asks starts one on loopback with `scripts/swift-s3.sh` (3-5 s on a quiet machine); a
/// watchdog started by the script stops it once this process is gone, even after a crash.
/// When neither is there, the suites are disabled and a loud `SKIPPED` line says why.
///
/// ```swift
/// @Suite(.enabled(if: LoopbackS3.isAvailable)) struct PutTests {
///   @Test func roundTrip() throws { let engine = try LoopbackS3.engine() … }
/// }
/// ```
public enum LoopbackS3 {
  public struct Engine: Sendable {
    /// `s3://BUCKET?endpoint=…&region=…&path-style=1`
    public var url: String
    public var accessKeyID: String
    public var secretAccessKey: String
    /// The proxy's port when this process started the engine (nil for `LARDER_TEST_S3`).
    public var port: Int?
  }

  static let packageRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

  /// The bucket the loopback engine is started with.
  public static let bucket = "larder-test"

  /// Whether S3 tests can run here; prints the SKIPPED line (once) when they cannot.
  public static let isAvailable: Bool = {
    if ProcessInfo.processInfo.environment["LARDER_TEST_S3"] != nil { return true }
    let installed = ["swift-proxy-server", "swift-object-server", "memcached"].allSatisfy { tool in
      ["/usr/bin", "/usr/local/bin", "/usr/sbin"].contains {
        FileManager.default.isExecutableFile(atPath: "\($0)/\(tool)")
      }
    }
    if !installed {
      let line = String(repeating: "!", count: 78)
      FileHandle.standardError.write(
        Data(
          "\n\(line)\nSKIPPED: S3 tests. OpenStack Swift is not installed (scripts/deps.sh installs it) and LARDER_TEST_S3 is not set.\n\(line)\n"
            .utf8))
    }
    return installed
  }()

  private static let started: Result<Engine, HarnessFailure> = start()

  /// The engine, starting it on first use.
  ///
  /// - Throws: `HarnessFailure` when it is installed but would not start (a failure, not a skip).
  public static func engine() throws -> Engine { try started.get() }

  /// The first port the kernel hands out for port 0 and outgoing connections (usually 32768).
  static var ephemeralPortsStart: Int {
    let text = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
    let low = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).first.flatMap { Int($0) }
    return max(low ?? 32768, 12_000)
  }

  private static func start() -> Result<Engine, HarnessFailure> {
    let env = ProcessInfo.processInfo.environment
    if let url = env["LARDER_TEST_S3"] {
      guard let id = env["AWS_ACCESS_KEY_ID"], let secret = env["AWS_SECRET_ACCESS_KEY"] else {
        return .failure(
          HarnessFailure("LARDER_TEST_S3 is set but AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY are not"))
      }
      return .success(Engine(url: url, accessKeyID: id, secretAccessKey: secret, port: nil))
    }
    let script = packageRoot.appendingPathComponent("scripts/swift-s3.sh").path
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("larder-s3-\(getpid())").path
    var environment = env
    environment["SWIFT_S3_OWNER_PID"] = String(getpid())
    var failures: [String] = []
    // Ports are taken five at a time (proxy, account, container, object, memcached), below the
    // kernel's ephemeral range, so that no test's client connection or port-0 server holds one.
    // The script refuses ports in use (exit 4), and another range is tried.
    for _ in 0..<5 {
      let port = Int.random(in: 10_000..<ephemeralPortsStart - 10) / 10 * 10
      do {
        let result = try Subprocess.run(
          "/bin/bash", [script, "start", dir, String(port), bucket], environment: environment, timeout: 180)
        if result.status == 0 {
          return .success(
            Engine(
              url: result.stdout.trimmingCharacters(in: .whitespacesAndNewlines), accessKeyID: "test:tester",
              secretAccessKey: "testing", port: port))
        }
        failures.append("port \(port): \(result)")
        if result.status != 4 { break }
      } catch {
        failures.append("port \(port): \(error)")
        break
      }
    }
    return .failure(
      HarnessFailure("scripts/swift-s3.sh did not start Swift:\n" + failures.joined(separator: "\n")))
  }
}
