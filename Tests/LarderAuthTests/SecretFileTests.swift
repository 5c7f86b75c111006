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
}

struct SecretFileTests {
  func mode(_ url: URL) -> UInt16 {
    var info = stat()
    _ = lstat(url.path, &info)
    return UInt16(info.st_mode & 0o7777)
  }

  @Test func createsA32ByteFileWithMode0600AndReusesIt() throws {
    let dir = try TemporaryDirectory()
    let first = try SecretFile.loadOrCreate(at: dir.secret)
    #expect(first.count == 32)
    #expect(mode(dir.secret) == 0o600)
    #expect(Array(try Data(contentsOf: dir.secret)) == first)
    let second = try SecretFile.loadOrCreate(at: dir.secret)
    #expect(second == first)
    // Nothing but the secret is left behind (the temporary file is gone).
    #expect(try FileManager.default.contentsOfDirectory(atPath: dir.url.path) == ["secret"])
    // Two directories get different secrets.
    let other = try TemporaryDirectory()
    #expect(try SecretFile.loadOrCreate(at: other.secret) != first)
  }

  @Test func tokensIssuedWithTheSecretVerifyAfterReload() throws {
    let dir = try TemporaryDirectory()
    let token = TokenIssuer(secret: try SecretFile.loadOrCreate(at: dir.secret)).issue(uid: "u1", ttl: 60)
    let verifier = JWTVerifier(hmacSecret: try SecretFile.loadOrCreate(at: dir.secret))
    #expect(try verifier.verify(token).uid == "u1")
  }

  @Test func refusesAGroupOrWorldReadableSecret() throws {
    let dir = try TemporaryDirectory()
    _ = try SecretFile.loadOrCreate(at: dir.secret)
    for bad: UInt16 in [0o644, 0o640, 0o604, 0o660] {
      #expect(chmod(dir.secret.path, mode_t(bad)) == 0)
      #expect(throws: AuthConfigurationError.insecureSecretFile(path: dir.secret.path, mode: bad)) {
        try SecretFile.loadOrCreate(at: dir.secret)
      }
    }
    #expect(
      AuthConfigurationError.insecureSecretFile(path: "/d/secret", mode: 0o644).message
        == "secret file /d/secret has mode 644; it must not be readable by group or others (chmod 600 /d/secret)"
    )
    #expect(chmod(dir.secret.path, 0o400) == 0)
    #expect(try SecretFile.loadOrCreate(at: dir.secret).count == 32)
  }

  @Test func refusesAWrongLength() throws {
    let dir = try TemporaryDirectory()
    for length in [0, 31, 33, 64] {
      try? FileManager.default.removeItem(at: dir.secret)
      #expect(
        FileManager.default.createFile(
          atPath: dir.secret.path, contents: Data(count: length), attributes: [.posixPermissions: 0o600]))
      #expect(
        throws: AuthConfigurationError.secretFileWrongLength(
          path: dir.secret.path, length: length, expected: 32)
      ) {
        try SecretFile.loadOrCreate(at: dir.secret)
      }
    }
  }

  @Test func refusesSymlinksAndDirectories() throws {
    let dir = try TemporaryDirectory()
    let target = dir.url.appendingPathComponent("elsewhere")
    _ = try SecretFile.loadOrCreate(at: target)
    try FileManager.default.createSymbolicLink(at: dir.secret, withDestinationURL: target)
    #expect(throws: AuthConfigurationError.io(path: dir.secret.path, operation: "open", errno: ELOOP)) {
      try SecretFile.loadOrCreate(at: dir.secret)
    }
    let asDirectory = dir.url.appendingPathComponent("secret-dir")
    try FileManager.default.createDirectory(at: asDirectory, withIntermediateDirectories: false)
    chmod(asDirectory.path, 0o700)
    #expect(throws: AuthConfigurationError.secretFileNotRegular(path: asDirectory.path)) {
      try SecretFile.loadOrCreate(at: asDirectory)
    }
  }

  @Test func reportsAMissingDirectory() throws {
    let dir = try TemporaryDirectory()
    let nowhere = dir.url.appendingPathComponent("missing/secret")
    #expect(throws: AuthConfigurationError.self) { try SecretFile.loadOrCreate(at: nowhere) }
    do {
      _ = try SecretFile.loadOrCreate(at: nowhere)
    } catch {
      #expect(error.code == "io_error")
      #expect(error.message.hasPrefix("create \(nowhere.path).tmp-"))
      #expect(error.message.hasSuffix(": No such file or directory"))
    }
  }
}
