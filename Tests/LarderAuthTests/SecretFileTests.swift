import Foundation
import LarderCrypto
import Testing

@testable import LarderAuth

/// A fresh directory per test, removed afterwards.
final class TemporaryDirectory {
  let url: URL
  init() throws {
    url = FileManager.default.temporaryDirectory.appendingPathComponent("larder-secret-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: false)
  }
  deinit { try? FileManager.default.removeItem(at: url) }
  var secret: URL { url.appendingPathComponent("secret") }

  /// Writes `bytes` as the legacy secret file an older Larder left, with `mode`.
  func writeSecret(_ bytes: [UInt8], mode: Int = 0o600, at url: URL? = nil) {
    let target = url ?? secret
    try? FileManager.default.removeItem(at: target)
    #expect(
      FileManager.default.createFile(
        atPath: target.path, contents: Data(bytes), attributes: [.posixPermissions: mode]))
  }
}

/// The legacy `DATA/secret` an upgraded store adopts into its catalog: read only when present,
/// and refused when it could have leaked or is not what a Larder wrote.
struct SecretFileTests {
  static let legacy = (0..<32).map { UInt8($0 * 5 + 1) }

  @Test func readsTheFileAndCreatesNothingWhenAbsent() throws {
    let dir = try TemporaryDirectory()
    #expect(try SecretFile.loadIfPresent(at: dir.secret) == nil)
    #expect(try FileManager.default.contentsOfDirectory(atPath: dir.url.path) == [])
    dir.writeSecret(Self.legacy)
    #expect(try SecretFile.loadIfPresent(at: dir.secret) == Self.legacy)
  }

  @Test func tokensIssuedWithTheLegacySecretVerifyWithIt() throws {
    let dir = try TemporaryDirectory()
    dir.writeSecret(Self.legacy)
    let token = TokenIssuer(secret: Self.legacy).issue(uid: "u1", ttl: 60)
    let verifier = JWTVerifier(hmacSecret: try #require(try SecretFile.loadIfPresent(at: dir.secret)))
    #expect(try verifier.verify(token).uid == "u1")
  }

  @Test func refusesAGroupOrWorldReadableSecret() throws {
    let dir = try TemporaryDirectory()
    dir.writeSecret(Self.legacy)
    for bad: UInt16 in [0o644, 0o640, 0o604, 0o660] {
      #expect(chmod(dir.secret.path, mode_t(bad)) == 0)
      #expect(throws: AuthConfigurationError.insecureSecretFile(path: dir.secret.path, mode: bad)) {
        try SecretFile.loadIfPresent(at: dir.secret)
      }
    }
    #expect(
      AuthConfigurationError.insecureSecretFile(path: "/d/secret", mode: 0o644).message
        == "secret file /d/secret has mode 644; it must not be readable by group or others (chmod 600 /d/secret)"
    )
    #expect(chmod(dir.secret.path, 0o400) == 0)
    #expect(try SecretFile.loadIfPresent(at: dir.secret) == Self.legacy)
  }

  @Test func refusesAWrongLength() throws {
    let dir = try TemporaryDirectory()
    for length in [0, 31, 33, 64] {
      dir.writeSecret([UInt8](repeating: 0, count: length))
      #expect(
        throws: AuthConfigurationError.secretFileWrongLength(
          path: dir.secret.path, length: length, expected: 32)
      ) {
        try SecretFile.loadIfPresent(at: dir.secret)
      }
    }
  }

  @Test func refusesSymlinksAndDirectories() throws {
    let dir = try TemporaryDirectory()
    let target = dir.url.appendingPathComponent("elsewhere")
    dir.writeSecret(Self.legacy, at: target)
    try FileManager.default.createSymbolicLink(at: dir.secret, withDestinationURL: target)
    #expect(throws: AuthConfigurationError.io(path: dir.secret.path, operation: "open", errno: ELOOP)) {
      try SecretFile.loadIfPresent(at: dir.secret)
    }
    let asDirectory = dir.url.appendingPathComponent("secret-dir")
    try FileManager.default.createDirectory(at: asDirectory, withIntermediateDirectories: false)
    chmod(asDirectory.path, 0o700)
    #expect(throws: AuthConfigurationError.secretFileNotRegular(path: asDirectory.path)) {
      try SecretFile.loadIfPresent(at: asDirectory)
    }
  }

  @Test func aPathUnderAMissingDirectoryIsAbsent() throws {
    let dir = try TemporaryDirectory()
    #expect(try SecretFile.loadIfPresent(at: dir.url.appendingPathComponent("missing/secret")) == nil)
    #expect(try FileManager.default.contentsOfDirectory(atPath: dir.url.path) == [])
  }
}
