import Foundation
import LarderAuth
import LarderClient

/// Access tokens for a service-account key file, as google-auth gets them: an RS256 assertion
/// signed with the key, traded at the key's `token_uri` for a bearer token, kept until five
/// minutes before it expires.
actor ServiceAccountCredentials {
  let key: ServiceAccountKeyFile
  /// The key file's path, for messages.
  let path: String
  private let tokenEndpoint: LarderClient
  private let tokenURI: URL
  private var current: AccessToken?

  /// Reads the key file.
  /// - Throws: ``CommandFailure`` saying why the file is not a usable key.
  init(keyFile path: String) throws {
    let bytes: Data
    do { bytes = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
      throw CommandFailure("cannot read the key file \(path): \(POSIXFailure.reason(error))")
    }
    do { key = try ServiceAccountKeyFile(json: Array(bytes)) } catch {
      throw CommandFailure("\(path) is not a service-account key file: \(error)")
    }
    guard let uri = URL(string: key.tokenURI), uri.scheme == "http" || uri.scheme == "https", uri.host != nil
    else {
      throw CommandFailure("\(path): token_uri '\(key.tokenURI.prefix(100))' is not an http(s) URL")
    }
    self.path = path
    tokenURI = uri
    tokenEndpoint = LarderClient(baseURL: uri, bucket: "", retryPolicy: .init(maxAttempts: 1), timeout: 30)
  }

  /// A bearer token, fetched or refreshed when needed.
  /// - Throws: ``CommandFailure`` naming the key and what the token endpoint said.
  func token() async throws -> String {
    if let current, current.expiresAt.timeIntervalSinceNow > 300 { return current.token }
    let assertion: String
    do { assertion = try key.assertion() } catch {
      throw CommandFailure("cannot sign with the key in \(path): \(error)")
    }
    do {
      let granted = try await tokenEndpoint.exchangeAssertion(assertion, at: tokenURI)
      current = granted
      return granted.token
    } catch LarderClientError.server(let e) {
      throw CommandFailure(
        "\(tokenURI.absoluteString) refused the key in \(path) (\(key.clientEmail)): \(e.status): \(e.message)"
      )
    } catch {
      throw CommandFailure(
        "cannot get a token for \(path) from its token_uri \(tokenURI.absoluteString): \(error)")
    }
  }
}

/// The reason text of a Foundation file error (`No such file or directory`), without its wrapping.
enum POSIXFailure {
  static func reason(_ error: any Error) -> String {
    let ns = error as NSError
    if let posix = ns.userInfo[NSUnderlyingErrorKey] as? NSError, posix.domain == NSPOSIXErrorDomain {
      return String(cString: strerror(Int32(posix.code)))
    }
    if ns.domain == NSCocoaErrorDomain, ns.code == NSFileReadNoSuchFileError {
      return String(cString: strerror(ENOENT))
    }
    return ns.localizedDescription
  }
}

/// Runs async work from a synchronous command and waits for it (the commands run on the main
/// thread; the work runs on the cooperative pool, never needing the main actor).
func waitFor<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) throws -> T {
  let outcome = WaitOutcome<T>()
  let done = DispatchSemaphore(value: 0)
  Task.detached {
    do { outcome.result = .success(try await work()) } catch { outcome.result = .failure(error) }
    done.signal()
  }
  done.wait()
  return try outcome.result!.get()
}

/// The result `waitFor` hands from the task to the waiting thread: written once by the task
/// before it signals, read after the wait, so the semaphore orders the two.
private final class WaitOutcome<T>: @unchecked Sendable {
  var result: Result<T, any Error>?
}
